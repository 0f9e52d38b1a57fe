// Colours and names of event classes, lane roles and memory categories, shared by every view and
// by the screenshot test (which looks for these colours in the image). Colours are packed as
// Dear ImGui's ImU32 (IM_COL32: R in the low byte, A in the high byte) without including ImGui.
#pragma once

#include <cstdint>
#include <string_view>

#include "profiler/trace.hpp"

namespace csim::gui {

using Rgba = std::uint32_t;  // IM_COL32 layout: 0xAABBGGRR

constexpr Rgba rgba(int r, int g, int b, int a = 255) {
  return static_cast<Rgba>(r & 255) | static_cast<Rgba>(g & 255) << 8 |
         static_cast<Rgba>(b & 255) << 16 | static_cast<Rgba>(a & 255) << 24;
}
constexpr int red_of(Rgba c) {
  return static_cast<int>(c & 255);
}
constexpr int green_of(Rgba c) {
  return static_cast<int>(c >> 8 & 255);
}
constexpr int blue_of(Rgba c) {
  return static_cast<int>(c >> 16 & 255);
}

// What the statistics split a GPU's step into: the five exclusive parts of docs/summary.md
// ("Time split") plus host work, for host lanes.
enum class Part : std::uint8_t { kCompute, kCommunication, kCopy, kHost, kGilWait, kIdle };
inline constexpr int kPartCount = 6;
const char* to_string(Part p);
Rgba part_colour(Part p);

// Fill colour of an event of class `c`: compute green, communication orange, copy blue,
// host grey-blue, GIL wait red, annotation (steps, phases) pale yellow, other grey.
Rgba class_colour(prof::EventClass c);

// Swatch colour of a lane of role `r`: the colour of the class of work that lane carries.
Rgba role_colour(prof::LaneRole r);

// The same colour darkened for folded blocks (many events narrower than a pixel drawn as one), so
// a fold never reads as one long event.
Rgba folded_colour(prof::EventClass c);

// Multiplies R, G, B by `f` (0..1 darkens, > 1 lightens, clamped).
Rgba scale_rgb(Rgba c, double f);

// Text colour readable on `background` (black on light fills, white on dark ones).
Rgba text_on(Rgba background);

// Memory categories as the simulator names them (params, grads, optimizer, activations, buffers,
// gathered_outputs, comm_buffers, workspace); unknown names get a colour from their hash.
Rgba memory_category_colour(std::string_view category);

// Short lane role label: "compute", "comm", "copy", "host", "other".
const char* role_label(prof::LaneRole r);

}  // namespace csim::gui
