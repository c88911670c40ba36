// Runs the fuzz harness once over every file of the given directories (the seed corpus and saved
// crash reproducers): the regression test that runs with any compiler, without libFuzzer.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (!fs::is_directory(argv[i], ec)) {
      std::printf("skipping %s (not a directory)\n", argv[i]);
      continue;
    }
    for (const auto& e : fs::recursive_directory_iterator(argv[i], ec))
      if (e.is_regular_file() && e.path().filename().string().front() != '.') files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "fuzz_kineto_regress: no input files found\n");
    return 1;
  }
  int failures = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Printed first so a crash is attributed to its input in the test log.
    std::printf("%s (%zu bytes)\n", f.string().c_str(), bytes.size());
    std::fflush(stdout);
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::printf("FAIL %s: exception other than core::Error escaped: %s\n", f.string().c_str(), e.what());
      ++failures;
    } catch (...) {
      std::printf("FAIL %s: non-std exception escaped\n", f.string().c_str());
      ++failures;
    }
  }
  std::printf("%zu inputs, %d failures\n", files.size(), failures);
  return failures == 0 ? 0 : 1;
}
