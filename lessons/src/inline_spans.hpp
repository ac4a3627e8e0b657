// Inline Markdown (code, strong, emphasis, links, escapes) of one paragraph,
// heading, list item, quote or table cell, as spans. Internal to pa_lesson:
// the block parser (markdown.cpp) calls it on each block's joined text.
#pragma once
#include <string_view>
#include <vector>

#include "pa/lessons/document.hpp"

namespace pa::lesson::detail {

// The spans of s, trimmed. Linear in s: closers are found by binary search in
// position lists built once, so unmatched openers never cause a rescan.
std::vector<Span> parse_inline(std::string_view s);

}  // namespace pa::lesson::detail
