#include "server/http/termination_signals.h"

#include <csignal>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

namespace fp4serve::http {

struct TerminationSignals::Impl {
  boost::asio::io_context io{1};
  boost::asio::signal_set signals{io, SIGINT, SIGTERM};
};

TerminationSignals::TerminationSignals() : impl_(std::make_unique<Impl>()) {}
TerminationSignals::~TerminationSignals() = default;

int TerminationSignals::wait() {
  int received = 0;
  impl_->signals.async_wait([&](const boost::system::error_code& ec, int signal_number) {
    if (!ec) received = signal_number;
  });
  impl_->io.restart();
  impl_->io.run();
  return received;
}

void TerminationSignals::cancel() {
  boost::asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ec;
    impl->signals.cancel(ec);
  });
}

}  // namespace fp4serve::http
