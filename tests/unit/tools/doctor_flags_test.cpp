// doctor takes every flag serve takes ("fp4serve doctor MODEL [serve flags]"): a serve flag added without
// doctor learning it would make doctor reject the very command line it is meant to check.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "tools/commands.h"

namespace fp4serve {
namespace {

TEST(DoctorFlags, DoctorAcceptsEveryServeFlag) {
  CLI::App app;
  tools::register_serve(app);
  tools::register_doctor(app);
  CLI::App* serve = app.get_subcommand("serve");
  CLI::App* doctor = app.get_subcommand("doctor");
  int checked = 0;
  for (const CLI::Option* o : serve->get_options()) {
    for (const std::string& name : o->get_lnames()) {
      ++checked;
      EXPECT_NO_THROW(doctor->get_option("--" + name)) << "doctor does not take serve's --" << name;
    }
  }
  EXPECT_GT(checked, 30);
  EXPECT_THROW(doctor->get_option("--no-such-flag"), CLI::OptionNotFound);  // the lookup can fail
}

}  // namespace
}  // namespace fp4serve
