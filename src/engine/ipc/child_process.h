// Starting the engine process: this program again (/proc/self/exe) with a socket to its parent on
// descriptor 3 and nothing else inherited (no listening socket, no client connection), its own
// process group (a terminal's Ctrl-C goes to the front-end, which stops it in order), all signals
// unblocked, and SIGKILL when the front-end dies (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace fp4serve::engine::ipc {

inline constexpr int kChildSocketFd = 3;

struct SpawnedChild {
  pid_t pid = -1;
  int fd = -1;  // the parent's end of the socket
};

// argv[0] is kept as the child's name; the program is /proc/self/exe. Throws std::system_error.
SpawnedChild spawn_self(const std::vector<std::string>& argv);

// "exited with code 1", "killed by signal 9 (Killed)", from waitpid's status.
std::string describe_wait_status(int status);

}  // namespace fp4serve::engine::ipc
