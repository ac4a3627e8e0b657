// The bundled trace files the Trace tab offers (assets/traces), and the
// bundled timelines (assets/timelines, *.patl): found recursively, since they
// are grouped by where they were made (assets/traces/host-model/qk.patrace,
// assets/traces/nvidia-h100/qk.patrace).
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pa::viewer {

struct TraceFileEntry {
  std::string relative;  // to the directory listed, '/'-separated: "nvidia-h100/qk.patrace"
  std::string path;      // the full path, to open
};

// Every regular file named *.patrace (or *`extension`: ".patl" for
// timelines) under dir, at any depth, sorted by its
// relative path. Never throws: a missing directory lists nothing, a
// subdirectory it may not read is skipped (another error ends the walk with
// what was found). Symbolic links to directories are not followed (no cycles).
std::vector<TraceFileEntry> list_trace_files(const std::filesystem::path& dir, std::string_view extension = ".patrace");

}  // namespace pa::viewer
