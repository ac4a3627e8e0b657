#include "core/lesson_binding.hpp"

#include <algorithm>

namespace pa::viewer {

std::vector<LessonMarker> lesson_markers(const lesson::Document& doc, int lesson_number) {
  std::vector<LessonMarker> out;
  for (const auto& m : doc.markers()) {
    LessonMarker lm;
    lm.marker = *m.marker;
    lm.lesson = lesson_number;
    lm.section = static_cast<int>(m.section);
    lm.heading = lesson::plain_text(doc.sections[m.section].heading);
    out.push_back(std::move(lm));
  }
  return out;
}

std::vector<std::pair<trace::Stage, BlockRole>> code_lineage(trace::Stage stage, BlockRole role) {
  using S = trace::Stage;
  std::vector<std::pair<S, BlockRole>> out{{stage, role}};
  // The v1 stages 1-5 each call the previous stages' step functions; the V2
  // partition kernel (stage 6's partition blocks, and the cascade's suffix
  // partitions) calls all of them.
  auto v1_steps_below = [&](int top) {
    for (int k = top; k >= 1; --k) out.push_back({static_cast<S>(k), BlockRole::main});
  };
  const int n = static_cast<int>(stage);
  switch (role) {
    case BlockRole::main:
      if (stage == S::cascade_merge) out.push_back({S::v2_partition, BlockRole::main});
      if (n >= 2 && n <= 7) v1_steps_below(std::min(n - 1, 5));
      break;
    case BlockRole::reduce:
    case BlockRole::prefix_reduce:
      // The cascade's suffix and prefix reduces are stage 6's reduce kernel.
      if (stage == S::cascade_merge) out.push_back({S::v2_partition, BlockRole::reduce});
      break;
    case BlockRole::merge:
    case BlockRole::prefix:
      break;  // the cascade's own kernels
  }
  return out;
}

namespace {
using Lineage = std::vector<std::pair<trace::Stage, BlockRole>>;

const LessonMarker* marker_in_lineage(std::span<const LessonMarker> markers, const Lineage& lineage, trace::Step step,
                                      int prefer_lesson) {
  for (const auto& [st, rl] : lineage) {
    const LessonMarker* best = nullptr;
    int best_rank = 4;
    for (const LessonMarker& m : markers) {
      if (m.marker.stage != st || m.marker.step != step) continue;
      if (m.marker.block && *m.marker.block != rl) continue;
      // 0: names the role, in the lesson shown; 1: names it, elsewhere;
      // 2, 3: the same without block= (any block of the stage).
      const int rank = (m.marker.block ? 0 : 2) + (m.lesson == prefer_lesson ? 0 : 1);
      if (rank < best_rank) {
        best = &m;
        best_rank = rank;
      }
    }
    if (best) return best;
  }
  return nullptr;
}
}  // namespace

const LessonMarker* marker_of_step(std::span<const LessonMarker> markers, trace::Stage stage, BlockRole role,
                                   trace::Step step, int prefer_lesson) {
  return marker_in_lineage(markers, code_lineage(stage, role), step, prefer_lesson);
}

StepBinding bind_step(std::span<const LessonMarker> markers, trace::Stage stage, const TraceIndex& index, int block,
                      int step, int prefer_lesson) {
  StepBinding b;
  const int n = index.num_steps(block);
  if (step < 0 || step >= n) return b;
  const Lineage lineage = code_lineage(stage, block_role(index.block(block).partition));
  const auto& steps = index.steps(block);
  auto at = [&](int k) { return marker_in_lineage(markers, lineage, steps[k].step, prefer_lesson); };
  if ((b.marker = at(step))) {
    b.marked_step = step;
    return b;
  }
  b.enclosing = true;
  for (int k = step - 1; k >= 0; --k)
    if ((b.marker = at(k))) {
      b.marked_step = k;
      return b;
    }
  for (int k = step + 1; k < n; ++k)
    if ((b.marker = at(k))) {
      b.marked_step = k;
      return b;
    }
  return b;
}

}  // namespace pa::viewer
