#include "core/trace_files.hpp"

#include <algorithm>
#include <system_error>

namespace pa::viewer {

std::vector<TraceFileEntry> list_trace_files(const std::filesystem::path& dir, std::string_view extension) {
  namespace fs = std::filesystem;
  std::vector<TraceFileEntry> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  // Bounded, so that a pathological tree cannot stall the UI thread.
  for (int guard = 0; !ec && it != fs::recursive_directory_iterator() && guard < 100000; ++guard) {
    const fs::directory_entry& e = *it;
    std::error_code fec;
    if (e.path().extension() == extension && e.is_regular_file(fec)) {
      const fs::path rel = e.path().lexically_relative(dir);
      out.push_back({rel.empty() ? e.path().filename().generic_string() : rel.generic_string(), e.path().string()});
    }
    it.increment(ec);
  }
  std::sort(out.begin(), out.end(),
            [](const TraceFileEntry& a, const TraceFileEntry& b) { return a.relative < b.relative; });
  return out;
}

}  // namespace pa::viewer
