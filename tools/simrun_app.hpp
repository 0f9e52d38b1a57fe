// simrun: run a scenario headless, print its summary, write trace/summary JSON: the command line
// over run/ (RunRequest -> run -> print). It lives here so tests can run it in-process;
// tools/simrun.cpp is main().
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "run/run.hpp"

namespace CLI {
class App;
}

namespace csim::app {

// Exit codes (also printed by --help): run/run.hpp's.
using run::kExitBackendUnavailable;
using run::kExitBadInput;
using run::kExitInternal;
using run::kExitOk;
using run::kExitOom;
using run::kExitRunFailed;

// RunRequest::mpi for this build: the MPI launcher when csim_run_mpi is linked, else null (launch
// mode mpi is then BackendUnavailable).
const run::MpiLauncher* mpi_support();

// "sim" / "standin" / "cuda" and "threads" / "processes" / "mpi", as the CLI's checks let them
// through, into the request's enums.
run::Backend backend_of(const std::string& name);
run::Launch launch_of(const std::string& name);

// --hf-config FILE, the same option for every command that takes a scenario (simrun, sweep,
// tune, hpo, compare): run::ScenarioLoader::from_file's hf_config.
void add_hf_config_option(CLI::App& app, std::string& path);

int simrun_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// Shared by simrun's commands. parse_command_line: -1 to go on, else the exit code (--help
// printed: 0; a bad option: 2, one line). run_command: runs the command's body and turns the
// exceptions every command can end with into its exit code (2 bad input, 3 backend unavailable,
// 1 internal error), printing one line prefixed by `tool`.
int parse_command_line(CLI::App& app, const std::vector<std::string>& args, const std::string& tool,
                       std::ostream& out, std::ostream& err);
int run_command(const std::string& tool, std::ostream& err, const std::function<int()>& body);

// The output files a command was asked to write, as (option, path) pairs; empty paths (options
// not given) are skipped. Called first in a command's body, before any input is read: each path
// is checked by prof::check_output_file (a missing, read-only or wrong-type path is an
// InputError naming the option, the path and the OS error: exit 2, nothing written;
// docs/limits.md, "Output paths").
void check_output_files(const std::vector<std::pair<std::string, std::string>>& outputs);

}  // namespace csim::app
