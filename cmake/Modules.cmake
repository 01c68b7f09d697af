# fp4serve_module(NAME DEPS ...): one static library per folder of src/ (src/NAME, recursively).
# Files are globbed so that adding an op file needs no CMake edit; CONFIGURE_DEPENDS re-globs on build.
# A folder with no .cpp yet becomes an INTERFACE library so the layering is declared from day one.
function(fp4serve_module name)
  cmake_parse_arguments(M "" "" "DEPS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cpp)
  # CUDA sources live in their own target (src/kernels/cuda/CMakeLists.txt).
  list(FILTER srcs EXCLUDE REGEX "/cuda/")
  set(target fp4serve_${name})
  if(srcs)
    add_library(${target} STATIC ${srcs})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} PUBLIC ${M_DEPS} Threads::Threads)
    target_compile_options(${target} PRIVATE ${FP4SERVE_WARNINGS})
    if(FP4SERVE_SANITIZE AND NOT name IN_LIST FP4SERVE_SANITIZE_EXCLUDE)
      target_compile_options(${target} PRIVATE ${FP4SERVE_SANITIZE_FLAGS})
    endif()
    fp4serve_isa_flags(${target})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${target} INTERFACE ${M_DEPS} Threads::Threads)
  endif()
endfunction()

# Runtime ISA dispatch: a kernel file named *_avx2.cpp, *_avx512.cpp, *_avx512bf16.cpp,
# *_avx512bf16vbmi.cpp (BF16 + VBMI: the panel kernels' byte tables) or *_amx.cpp is compiled for
# that ISA only (the avx512 tier needs F/BW/VL/DQ only, so its files get no BF16/VNNI
# flags: the compiler must not emit an instruction the tier's CPUs may lack); the rest of the program
# stays at the x86-64 baseline and picks the variant at run time (kernels/cpu/cpu_features.h). This keeps one binary correct on every x86-64 machine.
function(fp4serve_isa_flags target)
  get_target_property(srcs ${target} SOURCES)
  foreach(src ${srcs})
    if(src MATCHES "_avx2\\.cpp$")
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c")
    elseif(src MATCHES "_avx512\\.cpp$")
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq")
    elseif(src MATCHES "_avx512bf16\\.cpp$")
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni")
    elseif(src MATCHES "_avx512bf16vbmi\\.cpp$")
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni;-mavx512vbmi")
    elseif(src MATCHES "_amx\\.cpp$")
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS
        "-mavx2;-mfma;-mf16c;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512vnni;-mavx512vbmi;-mamx-tile;-mamx-bf16;-mamx-int8")
    endif()
  endforeach()
endfunction()
