// Every flag of `flashserve serve` (and the global ones) can also come from the environment, as
// containers and Kubernetes pass settings: --max-num-seqs from FLASHSERVE_MAX_NUM_SEQS. A flag
// on the command line wins over its variable.
#pragma once
#include <cctype>
#include <string>
#include <CLI/CLI.hpp>

namespace flashserve {

// FLASHSERVE_<LONG_NAME> for each of `app`'s own options that has none yet (help excepted).
inline void add_env_names(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt == app.get_help_ptr() || opt == app.get_help_all_ptr()) continue;
    if (opt->get_lnames().empty() || !opt->get_envname().empty()) continue;
    std::string name = "FLASHSERVE_";
    for (char c : opt->get_lnames().front()) name += c == '-' ? '_' : char(std::toupper(static_cast<unsigned char>(c)));
    opt->envname(name);
  }
}

}  // namespace flashserve
