#include "engine/ipc/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

namespace fp4serve::engine::ipc {

SpawnedChild spawn_self(const std::vector<std::string>& argv) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::system_error(errno, std::generic_category(), "socketpair");
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    throw std::system_error(err, std::generic_category(), "fork");
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
    ::setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (sv[1] == kChildSocketFd) ::fcntl(kChildSocketFd, F_SETFD, 0);
    else ::dup2(sv[1], kChildSocketFd);  // dup2 clears close-on-exec on the copy
    ::syscall(SYS_close_range, kChildSocketFd + 1, ~0U, 0);
    ::execv("/proc/self/exe", args.data());
    ::_exit(127);
  }
  ::close(sv[1]);
  return SpawnedChild{pid, sv[0]};
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  return fmt::format("ended with wait status {}", status);
}

}  // namespace fp4serve::engine::ipc
