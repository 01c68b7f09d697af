# The include rules of the layers (docs/ARCHITECTURE.md, "Layers"), checked by ctest (test "layering"):
#   cmake -DSRC=<repo>/src -P cmake/check_layering.cmake
# 1. The backend seam: model/, engine/ and server/ never include a backend's internals (kernels/cpu/,
#    kernels/cuda/), and neither do the device-neutral headers of kernels/ itself; they see only
#    kernels/backend.h and the op descriptions beside it.
# 2. Dependencies point down: a module includes only itself and the modules below it.
# Fails with every offending file and line.
cmake_minimum_required(VERSION 3.20)
if(NOT SRC)
  message(FATAL_ERROR "check_layering: pass -DSRC=<repository>/src")
endif()

# module -> the modules it may include (besides itself)
set(allowed_tensor "")
set(allowed_checkpoint "tensor")
set(allowed_tokenizer "")
set(allowed_hub "checkpoint;tensor")
set(allowed_kernels "tensor")
set(allowed_vision "tensor")
set(allowed_model "kernels;checkpoint;tensor;vision")
set(allowed_engine "model;kernels;checkpoint;tokenizer;tensor;vision")
set(allowed_server "engine;model;kernels;checkpoint;tokenizer;tensor;vision")
set(allowed_tools "server;engine;model;kernels;checkpoint;hub;tokenizer;tensor;vision")
set(modules tensor checkpoint hub tokenizer vision kernels model engine server tools)

set(problems "")
foreach(module ${modules})
  file(GLOB_RECURSE files "${SRC}/${module}/*.h" "${SRC}/${module}/*.cpp" "${SRC}/${module}/*.cu")
  foreach(f ${files})
    file(RELATIVE_PATH rel "${SRC}" "${f}")
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
    # Device-neutral: everything outside kernels/, and kernels/ headers not under a backend folder.
    set(neutral TRUE)
    if(rel MATCHES "^kernels/(cpu|cuda)/" OR (module STREQUAL "kernels" AND NOT rel MATCHES "^kernels/[^/]+\\.h$"))
      set(neutral FALSE)
    endif()
    if(module STREQUAL "tools")  # the composition root picks and builds the backend
      set(neutral FALSE)
    endif()
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\".*" "\\1" inc "${line}")
      if(neutral AND inc MATCHES "^kernels/(cpu|cuda)/")
        list(APPEND problems "${rel}: includes the backend internal ${inc}")
      endif()
      string(REGEX MATCH "^[a-z_]+" first "${inc}")
      if(inc MATCHES "/" AND first IN_LIST modules AND NOT first STREQUAL module)
        if(NOT first IN_LIST allowed_${module})
          list(APPEND problems "${rel}: ${module}/ includes ${inc} (a layer it must not depend on)")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()

if(problems)
  list(JOIN problems "\n  " text)
  message(FATAL_ERROR "layering violations:\n  ${text}")
endif()
message(STATUS "layering: no violations")
