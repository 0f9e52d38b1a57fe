// The bad-input catalogue through the built command lines (docs/limits.md, "Bad input"): every
// case of tests/bad_inputs/cli_cases.json (outputs, directories, binary and missing files, nesting
// past the JSON limit, options of every tool: simrun and its subcommands, tracediff, trace_check,
// simview) and every case of tests/bad_inputs/cases.json (scenario keys and whole files, through
// simrun) runs the tool as a child process in a fresh working directory and must be clean:
//  - the documented exit code (2 unless the case says otherwise);
//  - exactly one line on stderr, starting with the tool's name, naming the file, key or option,
//    saying what is wrong (the case's "expect"), with a hint or the OS error;
//  - nothing left behind: the working directory holds exactly what the case put there (no
//    output, no *.tmp.* temporary).
// The deep-nesting cases run under setrlimit (address space and CPU time), so a parser whose
// memory or time grows with the depth fails them by a resource limit, not by a clock.
//
// Tally mode (docs/limits.md, "The catalogue"): the hidden case "[.tally]" runs every case and
// prints each verdict and the counts instead of failing, against the binaries of
// $CSIM_BAD_CLI_BIN_DIR when set (e.g. an older build), else this build's.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bad_input_catalogue.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSrc = CSIM_SOURCE_DIR;
const fs::path kDir = kSrc / "tests" / "bad_inputs";

// [SECTION] The tools
// ------------------------------------------------------------------------------

// The executable of TOOL: $CSIM_BAD_CLI_BIN_DIR/TOOL when that is set, else this build's ("" when
// it was not built: simview without the GUI).
std::string exe_of(const std::string& tool) {
  if (const char* dir = std::getenv("CSIM_BAD_CLI_BIN_DIR")) return (fs::path(dir) / tool).string();
  if (tool == "simrun") return CSIM_SIMRUN;
  if (tool == "tracediff") return CSIM_TRACEDIFF;
  if (tool == "trace_check") return CSIM_TRACE_CHECK;
#ifdef CSIM_SIMVIEW
  if (tool == "simview") return CSIM_SIMVIEW;
#endif
  return "";
}

bool sanitized() {
#if CSIM_SANITIZED
  return std::getenv("CSIM_BAD_CLI_BIN_DIR") == nullptr;  // another build's binaries: unknown
#else
  return false;
#endif
}

const std::set<std::string> kSubcommands = {"collective", "sweep",   "tune",
                                            "hpo",        "compare", "calibrate"};

// What the tool's one line starts with: "simrun: ", "simrun sweep: ", "tracediff: ", ...
std::string prefix_of(const std::string& tool, const std::vector<std::string>& args) {
  if (tool == "simrun" && !args.empty() && kSubcommands.count(args[0]))
    return "simrun " + args[0] + ": ";
  return tool + ": ";
}

// [SECTION] A case
// ----------------------------------------------------------------------------------

struct Case {
  std::string id, why, tool;
  std::vector<std::string> args;
  json setup = json::array();  // what the working directory holds before the run
  int exit = 2;
  std::vector<std::string> names;  // the file, key or option the line must name
  std::string expect;              // what is wrong, as the line says it
  std::string hint;                // when given: the line holds "(hint: " + hint
  json limits = json::object();    // as_mib, cpu_s, sanitized_rss_mib
  bool unprivileged = false;
};

std::string expand(std::string s) {
  for (std::size_t p; (p = s.find("{src}")) != std::string::npos;) s.replace(p, 5, kSrc.string());
  return s;
}

std::vector<Case> cli_cases() {
  std::ifstream in(kDir / "cli_cases.json");
  REQUIRE(in);
  const json cat = json::parse(in);
  std::vector<Case> out;
  for (const json& c : cat.at("cases")) {
    Case k;
    k.id = c.at("id");
    k.why = c.at("why");
    k.tool = c.at("tool");
    for (const json& a : c.at("args")) k.args.push_back(expand(a));
    k.setup = c.value("setup", json::array());
    k.exit = c.value("exit", 2);
    for (const json& n : c.at("names")) k.names.push_back(n);
    k.expect = c.at("expect");
    k.limits = c.value("limits", json::object());
    k.unprivileged = c.value("unprivileged", false);
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<Case> scenario_cases() {
  const json cat = csim::test::load_bad_input_catalogue();
  std::vector<Case> out;
  int n = 0;
  for (const json& c : cat.at("cases")) {
    ++n;
    std::string first_path;
    const json doc = csim::test::apply_bad_input_case(cat, c, &first_path);
    Case k;
    k.id = "cases.json#" + std::to_string(n) + " " + c.at("key").get<std::string>();
    k.why = c.at("why");
    k.tool = "simrun";
    k.args = {"case.json", "-q", "-o", "t.json", "--summary", "s.json"};
    k.setup = json::array({{{"file", "case.json"}, {"text", doc.dump(1) + "\n"}}});
    k.names = {"case.json: " + c.value("path", first_path) + ": "};
    k.expect = c.at("expect");
    k.hint = c.value("hint", "");
    out.push_back(std::move(k));
  }
  for (const json& c : cat.at("files")) {
    Case k;
    const std::string file = (kDir / c.at("file").get<std::string>()).string();
    k.id = "cases.json file " + c.at("file").get<std::string>();
    k.why = c.at("why");
    k.tool = "simrun";
    k.args = {file, "-q", "-o", "t.json", "--summary", "s.json"};
    k.exit = c.value("exit", 2);
    const std::string path = c.value("path", "");
    k.names = {file + ": " + (path.empty() ? "" : path + ": ")};
    k.expect = c.at("expect");
    k.hint = c.value("hint", "");
    // The 20,000 nested arrays once took 781 MB and 4.4 s: bounded like the cli_cases deep ones.
    if (c.at("file") == "deep_nesting.json")
      k.limits = {{"as_mib", 128}, {"cpu_s", 10}, {"sanitized_rss_mib", 512}};
    out.push_back(std::move(k));
  }
  return out;
}

// [SECTION] Running a case
// --------------------------------------------------------------------------

// The working directory's contents, recursively, as relative paths ("ro/", "t.json").
std::set<std::string> snapshot(const fs::path& dir) {
  std::set<std::string> s;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       it != end; it.increment(ec)) {
    std::string rel = fs::relative(it->path(), dir).string();
    if (it->is_directory()) rel += "/";
    s.insert(rel);
  }
  return s;
}

void write_setup(const fs::path& dir, const json& setup) {
  for (const json& e : setup) {
    if (e.contains("dir")) {
      fs::create_directories(dir / e.at("dir").get<std::string>());
      continue;
    }
    const fs::path f = dir / e.at("file").get<std::string>();
    std::ofstream out(f, std::ios::binary);
    if (e.contains("text")) {
      out << e.at("text").get<std::string>();
    } else if (e.contains("hex")) {
      const std::string h = e.at("hex");
      for (std::size_t i = 0; i + 1 < h.size(); i += 2)
        out.put(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
    } else {
      // 'nest' levels of arrays, generated (a 200,000-level file is 400 KB: not committed).
      const std::size_t n = e.at("nest").get<std::size_t>();
      const std::string doc = std::string(n, '[') + std::string(n, ']');
      std::string wrap = e.value("wrap", "%s");
      wrap.replace(wrap.find("%s"), 2, doc);
      out << wrap;
    }
  }
  // Modes last (a read-only directory is filled first).
  for (const json& e : setup)
    if (e.contains("mode"))
      fs::permissions(
          dir / e.at("dir").get<std::string>(),
          static_cast<fs::perms>(std::stoi(e.at("mode").get<std::string>(), nullptr, 8)));
}

struct Outcome {
  int code = -1;    // exit status; -1 when killed by a signal
  int signal = 0;   // the signal that killed it
  std::string err;  // stderr
  long maxrss_kib = 0;
  bool ran_unprivileged = false;
};

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Takes from this process, and from whatever it execs, the capabilities that let root write
// through a directory's mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER; capabilities(7)),
// keeping uid 0 so every path stays as reachable as it is for the test (a clone under /root, 0700,
// is not reachable by uid 65534). Root's execve gives the new program its inheritable set plus the
// bounding set, so both lose the three as well as the effective and permitted sets.
// Async-signal-safe (prctl and capget/capset system calls only). False where it cannot (no
// CAP_SETPCAP, as in some containers).
bool drop_write_override() {
  const int caps[] = {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER};
  for (int c : caps)
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0) return false;
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  for (int c : caps) {
    const std::uint32_t bit = 1u << (c % 32);
    data[c / 32].effective &= ~bit;
    data[c / 32].permitted &= ~bit;
    data[c / 32].inheritable &= ~bit;
  }
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Runs EXE ARGS in CWD with stdout to /dev/null and stderr to ERR_FILE, under the case's limits.
// UNPRIVILEGED and this process root: the child runs without the capabilities that write through a
// mode (drop_write_override), or as uid 65534 where those cannot be dropped. Between fork and exec
// the child calls only async-signal-safe functions (chdir, open, dup2, setrlimit, prctl, capset,
// setgroups, setgid, setuid, execve).
Outcome run_child(const std::string& exe, const std::vector<std::string>& args, const fs::path& cwd,
                  const json& limits, bool unprivileged, const fs::path& err_file) {
  std::vector<std::string> argv_s = {exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  std::string asan = "ASAN_OPTIONS=";
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "ASAN_OPTIONS=", 13) == 0)
      asan = *e;
    else
      env_s.push_back(*e);
  }
  // Under the sanitizers RLIMIT_AS cannot be used (ASan reserves terabytes of shadow address
  // space): its own RSS limit stands in for it.
  const bool rss_limit = sanitized() && limits.contains("sanitized_rss_mib");
  if (rss_limit)
    asan += std::string(asan.size() > 13 ? ":" : "") +
            "hard_rss_limit_mb=" + std::to_string(limits.at("sanitized_rss_mib").get<long>());
  if (asan.size() > 13) env_s.push_back(asan);
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string cwd_s = cwd.string(), err_s = err_file.string();
  const rlim_t as_bytes =
      !sanitized() && limits.contains("as_mib") ? limits.at("as_mib").get<rlim_t>() << 20 : 0;
  // Every child gets a CPU cap as a safety net against a hang (a bad input should fail in
  // milliseconds); the deep-nesting cases a tight one.
  const rlim_t cpu_s = limits.value("cpu_s", 300);
  const bool drop = unprivileged && ::geteuid() == 0;

  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::chdir(cwd_s.c_str()) != 0) _exit(126);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    const int err_fd = ::open(err_s.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (null_fd < 0 || err_fd < 0) _exit(126);
    ::dup2(null_fd, 1);
    ::dup2(err_fd, 2);
    const int in_fd = ::open("/dev/null", O_RDONLY);
    if (in_fd >= 0) ::dup2(in_fd, 0);
    if (as_bytes > 0) {
      const rlimit r{as_bytes, as_bytes};
      ::setrlimit(RLIMIT_AS, &r);
    }
    const rlimit c{cpu_s, cpu_s};
    ::setrlimit(RLIMIT_CPU, &c);
    if (drop && !drop_write_override()) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) _exit(125);
    }
    ::execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  REQUIRE(::wait4(pid, &status, 0, &ru) == pid);
  Outcome o;
  if (WIFEXITED(status)) o.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  o.err = read_all(err_file);
  o.maxrss_kib = ru.ru_maxrss;
  o.ran_unprivileged = drop && !(WIFEXITED(status) && WEXITSTATUS(status) == 125);
  return o;
}

const std::vector<std::string>& os_errors() {
  static const std::vector<std::string> kErrors = [] {
    std::vector<std::string> v;
    for (int e : {ENOENT, EISDIR, ENOTDIR, EACCES, EPERM, EROFS, ENOSPC})
      v.push_back(std::strerror(e));
    return v;
  }();
  return kErrors;
}

// Runs case K in a fresh directory under ROOT; returns what is not clean about it (empty: clean).
std::vector<std::string> run_case(const Case& k, const fs::path& root, int index) {
  std::vector<std::string> problems;
  const std::string exe = exe_of(k.tool);
  const fs::path work = root / ("w" + std::to_string(index));
  const fs::path err_file = root / ("e" + std::to_string(index) + ".txt");
  fs::create_directories(work);
  // The model.hf_config cases name a bundled config relative to the scenario's folder, as
  // tests/test_bad_inputs.cpp lays them out.
  fs::create_directories(work / "models");
  fs::copy_file(fs::path(CSIM_SOURCE_DIR) / "scenarios" / "models" / "gpt2.json",
                work / "models" / "gpt2.json");
  write_setup(work, k.setup);
  if (k.unprivileged && ::geteuid() == 0) {
    // Where the child falls back to uid 65534, it must be able to enter the working directory
    // (mkdtemp-like 0700 otherwise).
    fs::permissions(work, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }
  const std::set<std::string> before = snapshot(work);
  const Outcome o = run_child(exe, k.args, work, k.limits, k.unprivileged, err_file);
  if (o.signal != 0)
    problems.push_back("killed by signal " + std::to_string(o.signal) +
                       (o.signal == SIGXCPU || o.signal == SIGKILL ? " (a resource limit)" : ""));
  else if (o.code != k.exit)
    problems.push_back("exit " + std::to_string(o.code) + ", expected " + std::to_string(k.exit));
  const std::size_t lines = static_cast<std::size_t>(std::count(o.err.begin(), o.err.end(), '\n'));
  if (lines != 1 || o.err.empty() || o.err.back() != '\n')
    problems.push_back(std::to_string(lines) + " lines on stderr, expected 1");
  const std::string prefix = prefix_of(k.tool, k.args);
  if (o.err.rfind(prefix, 0) != 0) problems.push_back("does not start with '" + prefix + "'");
  for (const std::string& n : k.names)
    if (o.err.find(n) == std::string::npos) problems.push_back("does not name '" + n + "'");
  if (o.err.find(k.expect) == std::string::npos)
    problems.push_back("does not say '" + k.expect + "'");
  if (!k.hint.empty() && o.err.find("(hint: " + k.hint) == std::string::npos)
    problems.push_back("no hint '" + k.hint + "'");
  bool helps = o.err.find("(hint: ") != std::string::npos;
  for (const std::string& e : os_errors()) helps = helps || o.err.find(e) != std::string::npos;
  if (!helps) problems.push_back("neither a hint nor an OS error");
  if (k.unprivileged && ::geteuid() == 0 && !o.ran_unprivileged)
    problems.push_back("could not drop root's write-through capabilities nor run as uid 65534");
  // Nothing left behind. The read-only directories are made writable again to compare and clean.
  for (const json& e : k.setup)
    if (e.contains("mode"))
      fs::permissions(work / e.at("dir").get<std::string>(), fs::perms::owner_all);
  const std::set<std::string> after = snapshot(work);
  for (const std::string& p : after)
    if (!before.count(p)) problems.push_back("left behind: " + p);
  for (const std::string& p : before)
    if (!after.count(p)) problems.push_back("removed: " + p);
  if (!problems.empty()) {
    std::string s = o.err;
    if (s.size() > 600) s = s.substr(0, 600) + "...";
    problems.push_back("stderr: " + s);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::remove(err_file, ec);
  return problems;
}

fs::path fresh_root(const std::string& tag) {
  const fs::path root =
      fs::temp_directory_path() / ("csim_bad_cli_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  fs::permissions(root, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  return root;
}

// Every case of CASES whose tool is TOOL (all when TOOL is empty), of index FROM to TO - 1, must be
// clean.
void check_all(const std::vector<Case>& cases, const std::string& tool, const std::string& tag,
               std::size_t from = 0, std::size_t to = SIZE_MAX) {
  const fs::path root = fresh_root(tag);
  int n = 0, i = 0;
  for (const Case& k : cases) {
    ++i;
    if (static_cast<std::size_t>(i - 1) < from || static_cast<std::size_t>(i - 1) >= to) continue;
    if (!tool.empty() && k.tool != tool) continue;
    ++n;
    INFO(k.id << ": " << k.why << "\n  " << k.tool << " " << [&] {
      std::string a;
      for (const std::string& s : k.args) a += (s.size() > 80 ? s.substr(0, 80) + "..." : s) + " ";
      return a;
    }());
    const std::vector<std::string> problems = run_case(k, root, i);
    std::string all;
    for (const std::string& p : problems) all += "\n  " + p;
    INFO("not clean:" << all);
    CHECK(problems.empty());
  }
  CHECK(n > 0);
  fs::remove_all(root);
}

}  // namespace

TEST_CASE("bad command lines: the catalogue is well formed and covers every tool",
          "[bad_inputs][cli]") {
  const std::vector<Case> cases = cli_cases();
  std::set<std::string> ids, commands;
  for (const Case& k : cases) {
    INFO(k.id);
    CHECK(ids.insert(k.id).second);
    CHECK((k.tool == "simrun" || k.tool == "tracediff" || k.tool == "trace_check" ||
           k.tool == "simview"));
    CHECK_FALSE(k.names.empty());
    CHECK_FALSE(k.expect.empty());
    commands.insert(prefix_of(k.tool, k.args));
  }
  // Every command line of the project (docs/limits.md, "Exit codes") has bad-input cases.
  for (const char* c :
       {"simrun: ", "simrun collective: ", "simrun sweep: ", "simrun tune: ", "simrun hpo: ",
        "simrun compare: ", "simrun calibrate: ", "tracediff: ", "trace_check: ", "simview: "}) {
    INFO(c);
    CHECK(commands.count(c) == 1);
  }
  CHECK(cases.size() >= 100);
}

TEST_CASE("bad command lines: simrun and its subcommands", "[bad_inputs][cli]") {
  check_all(cli_cases(), "simrun", "simrun");
}

TEST_CASE("bad command lines: tracediff", "[bad_inputs][cli]") {
  check_all(cli_cases(), "tracediff", "tracediff");
}

TEST_CASE("bad command lines: trace_check", "[bad_inputs][cli]") {
  check_all(cli_cases(), "trace_check", "trace_check");
}

#ifdef CSIM_SIMVIEW
TEST_CASE("bad command lines: simview", "[bad_inputs][cli]") {
  check_all(cli_cases(), "simview", "simview");
}
#endif

// cases.json's ~320 cases in three parts, each a CTest test of its own: under ASan a simrun child
// takes about half a second of CPU, and one test of them all came near CTest's timeout on a
// loaded machine.
TEST_CASE("bad command lines: cases.json through the built simrun, part 1 of 3",
          "[bad_inputs][cli]") {
  const std::vector<Case> cases = scenario_cases();
  check_all(cases, "", "scenarios1", 0, cases.size() / 3);
}

TEST_CASE("bad command lines: cases.json through the built simrun, part 2 of 3",
          "[bad_inputs][cli]") {
  const std::vector<Case> cases = scenario_cases();
  check_all(cases, "", "scenarios2", cases.size() / 3, 2 * cases.size() / 3);
}

TEST_CASE("bad command lines: cases.json through the built simrun, part 3 of 3",
          "[bad_inputs][cli]") {
  const std::vector<Case> cases = scenario_cases();
  check_all(cases, "", "scenarios3", 2 * cases.size() / 3);
}

TEST_CASE("bad command lines: tally of the whole catalogue", "[.tally]") {
  // Not a check: prints each case's verdict and the counts (docs/limits.md, "The catalogue").
  std::vector<Case> cases = cli_cases();
  for (Case& k : scenario_cases()) cases.push_back(std::move(k));
  const fs::path root = fresh_root("tally");
  int clean = 0, run = 0, i = 0;
  std::map<std::string, std::pair<int, int>> by_command;  // command -> (clean, run)
  for (const Case& k : cases) {
    ++i;
    if (exe_of(k.tool).empty() || !fs::exists(exe_of(k.tool))) {
      std::cout << "not run (no " << k.tool << "): " << k.id << "\n";
      continue;
    }
    const std::vector<std::string> problems = run_case(k, root, i);
    ++run;
    auto& [c, r] = by_command[prefix_of(k.tool, k.args)];
    ++r;
    if (problems.empty()) {
      ++clean;
      ++c;
      std::cout << "clean: " << k.id << "\n";
    } else {
      std::cout << "NOT CLEAN: " << k.id << " (" << k.why << ")";
      for (const std::string& p : problems) std::cout << "\n    " << p;
      std::cout << "\n";
    }
  }
  for (const auto& [cmd, cr] : by_command)
    std::cout << "  " << cmd << cr.first << " of " << cr.second << " clean\n";
  std::cout << "catalogue: " << run << " cases run, " << clean << " clean\n";
  fs::remove_all(root);
}
