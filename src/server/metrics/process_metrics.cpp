#include "server/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fp4serve::server::metrics {
namespace {

std::optional<double> boot_time_seconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "btime") {
      double value = 0;
      in >> value;
      return value;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ProcessMetrics> read_process_metrics() {
  std::ifstream in("/proc/self/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  // Fields after the command name, which is in parentheses and may itself contain spaces.
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 2));
  std::vector<std::string> fields;  // fields[0] is field 3 (state)
  for (std::string f; rest >> f;) fields.push_back(f);
  if (fields.size() < 22) return std::nullopt;
  const auto field = [&](int number) { return std::stod(fields[static_cast<std::size_t>(number - 3)]); };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto btime = boot_time_seconds();
  if (!btime || ticks <= 0) return std::nullopt;

  ProcessMetrics m;
  m.virtual_memory_bytes = field(23);
  m.resident_memory_bytes = field(24) * page;
  m.start_time_seconds = field(22) / ticks + *btime;
  m.cpu_seconds_total = (field(14) + field(15)) / ticks;
  std::error_code ec;
  std::size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) m.open_fds = static_cast<double>(fds);
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) m.max_fds = static_cast<double>(limit.rlim_cur);
  return m;
}

void write_process_metrics(const ProcessMetrics& m, PrometheusTextWriter& writer) {
  writer.gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", {{{}, m.virtual_memory_bytes}});
  writer.gauge("process_resident_memory_bytes", "Resident memory size in bytes.", {{{}, m.resident_memory_bytes}});
  writer.gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
               {{{}, m.start_time_seconds}});
  writer.plain_counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                       {{{}, m.cpu_seconds_total}});
  if (m.open_fds) writer.gauge("process_open_fds", "Number of open file descriptors.", {{{}, *m.open_fds}});
  if (m.max_fds) writer.gauge("process_max_fds", "Maximum number of open file descriptors.", {{{}, *m.max_fds}});
}

}  // namespace fp4serve::server::metrics
