// Enum names for labels. The canonical tables are pa::trace::to_string
// (pa_trace); these forward to them, so the viewer's core only needs the
// header at compile time and the library at link time.
#pragma once
#include <optional>
#include <string_view>

#include "pa/core/event.hpp"
#include "pa/trace/replay.hpp"

namespace pa::viewer {
inline const char* step_name(trace::Step s) { return trace::to_string(s); }
inline const char* stage_name(trace::Stage s) { return trace::to_string(s); }
inline const char* op_name(trace::Op o) { return trace::to_string(o); }
inline const char* tensor_name(trace::Tensor t) { return trace::to_string(t); }
// What a step does, in a line (the toolbar beside the step's name, the
// Inspect tab): the viewer's words for a learner, beside the enum's names.
const char* step_summary(trace::Step s);
// A replay granularity's name, as --granularity takes it and pa-viewer.ini
// keeps it: "instruction" or "step".
inline const char* granularity_name(trace::Granularity g) {
  return g == trace::Granularity::step ? "step" : "instruction";
}
inline std::optional<trace::Granularity> granularity_from_name(std::string_view name) {
  for (const trace::Granularity g : {trace::Granularity::instruction, trace::Granularity::step})
    if (name == granularity_name(g)) return g;
  return std::nullopt;
}
}  // namespace pa::viewer
