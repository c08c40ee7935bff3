// `tapeformer gradcheck --ops`: float64 finite-difference checks of every op, printed as a table.
#include <algorithm>
#include <cstdio>

#include "framework/gradcheck.h"
#include "tools/commands.h"

namespace tf::tools {

namespace {

int check_ops() {
  std::printf("%-34s %-36s %12s %12s  %s\n", "op", "shapes", "max abs err", "max rel err", "result");
  int failed = 0;
  for (const OpCase& c : op_cases()) {
    const GradcheckReport r = run_op_case(c);
    failed += !r.passed();
    std::printf("%-34s %-36s %12.2e %12.2e  %s\n", c.name.c_str(), c.shapes.c_str(), r.max_abs_error(),
                r.max_rel_error(), r.passed() ? "pass" : "FAIL");
    if (!r.passed()) std::printf("%s", r.to_string().c_str());
  }
  std::printf("%zu op cases, %d failed (float64, central differences, eps 1e-6, rtol 1e-6)\n",
              op_cases().size(), failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

void add_gradcheck_command(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand("gradcheck", "Check gradients against finite differences in float64");
  static bool ops = false;
  cmd->add_flag("--ops", ops, "Check every op of the framework");
  cmd->callback([&exit_code] {
    if (!ops) throw CLI::RequiredError("--ops");
    exit_code = check_ops();
  });
}

}  // namespace tf::tools
