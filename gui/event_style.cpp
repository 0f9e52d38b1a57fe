// Class, role and memory-category colours (event_style.hpp).
#include "gui/event_style.hpp"

#include <algorithm>
#include <functional>
#include <string>

namespace csim::gui {

const char* to_string(Part p) {
  switch (p) {
    case Part::kCompute:
      return "compute";
    case Part::kCommunication:
      return "communication";
    case Part::kCopy:
      return "copy";
    case Part::kHost:
      return "host";
    case Part::kGilWait:
      return "idle: GIL wait";  // the GPU idles while its host threads wait for the GIL
    case Part::kIdle:
      return "idle";
  }
  return "?";
}

Rgba role_colour(prof::LaneRole r) {
  switch (r) {
    case prof::LaneRole::kCompute:
      return class_colour(prof::EventClass::kCompute);
    case prof::LaneRole::kComm:
      return class_colour(prof::EventClass::kCommunication);
    case prof::LaneRole::kCopy:
      return class_colour(prof::EventClass::kCopy);
    case prof::LaneRole::kHost:
      return class_colour(prof::EventClass::kHost);
    case prof::LaneRole::kOther:
      return class_colour(prof::EventClass::kOther);
  }
  return class_colour(prof::EventClass::kOther);
}

Rgba class_colour(prof::EventClass c) {
  using prof::EventClass;
  switch (c) {
    case EventClass::kCompute:
      return rgba(76, 175, 80);
    case EventClass::kCommunication:
      return rgba(255, 152, 0);
    case EventClass::kCopy:
      return rgba(66, 133, 244);
    case EventClass::kHost:
      return rgba(120, 144, 170);
    case EventClass::kGilWait:
      return rgba(229, 57, 53);
    case EventClass::kAnnotation:
      return rgba(236, 214, 140);
    case EventClass::kOther:
      return rgba(150, 150, 150);
  }
  return rgba(150, 150, 150);
}

Rgba part_colour(Part p) {
  using prof::EventClass;
  switch (p) {
    case Part::kCompute:
      return class_colour(EventClass::kCompute);
    case Part::kCommunication:
      return class_colour(EventClass::kCommunication);
    case Part::kCopy:
      return class_colour(EventClass::kCopy);
    case Part::kHost:
      return class_colour(EventClass::kHost);
    case Part::kGilWait:
      return class_colour(EventClass::kGilWait);
    case Part::kIdle:
      return rgba(70, 70, 78);
  }
  return rgba(70, 70, 78);
}

Rgba scale_rgb(Rgba c, double f) {
  auto ch = [f](int v) { return std::clamp(static_cast<int>(v * f + 0.5), 0, 255); };
  return rgba(ch(red_of(c)), ch(green_of(c)), ch(blue_of(c)), static_cast<int>(c >> 24));
}

Rgba folded_colour(prof::EventClass c) {
  return scale_rgb(class_colour(c), 0.62);
}

Rgba text_on(Rgba bg) {
  // Rec. 601 luma; the threshold sits between the light class fills and the dark folded ones.
  const double luma = 0.299 * red_of(bg) + 0.587 * green_of(bg) + 0.114 * blue_of(bg);
  return luma > 140 ? rgba(16, 16, 16) : rgba(245, 245, 245);
}

Rgba memory_category_colour(std::string_view cat) {
  if (cat == "params") return rgba(92, 107, 192);
  if (cat == "grads") return rgba(171, 71, 188);
  if (cat == "optimizer") return rgba(239, 83, 80);
  if (cat == "activations") return rgba(102, 187, 106);
  if (cat == "buffers") return rgba(141, 110, 99);
  if (cat == "gathered_outputs") return rgba(255, 167, 38);
  if (cat == "comm_buffers") return rgba(38, 198, 218);
  if (cat == "workspace") return rgba(189, 189, 189);
  // memory_model.hpp's kUnattributedMemory: allocated bytes without a category (a PyTorch
  // profile_memory trace's total), blue grey, apart from every category above.
  if (cat == "allocated (no breakdown)") return rgba(120, 144, 156);
  const std::size_t h = std::hash<std::string_view>{}(cat);
  return rgba(80 + static_cast<int>(h % 150), 80 + static_cast<int>(h / 150 % 150),
              80 + static_cast<int>(h / 22500 % 150));
}

const char* role_label(prof::LaneRole r) {
  return prof::to_string(r);
}

}  // namespace csim::gui
