// Replays saved fuzz inputs without libFuzzer (docs/fuzzing.md, "Regressions"): linked with one
// fuzz target's source in the regular build, it feeds every file named on the command line, or
// found directly in a directory named there, to LLVMFuzzerTestOneInput. README files, *.md files
// and dot files are not inputs and are skipped. A bug aborts (or trips the sanitizers in the asan
// preset), so the CTest test fails; an empty directory passes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool is_input(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] != '.' && name.rfind("README", 0) != 0 && p.extension() != ".md";
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      for (const fs::directory_entry& e : fs::directory_iterator(arg)) {
        if (e.is_regular_file() && is_input(e.path())) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "fuzz replay: no such file or directory: %s\n", argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("replay %s (%zu bytes)\n", f.string().c_str(), bytes.size());
    std::fflush(stdout);
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("fuzz replay: %zu input(s) replayed, no failure\n", files.size());
  return 0;
}
