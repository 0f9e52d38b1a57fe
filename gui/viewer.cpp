// The simview UI (viewer.hpp).
//
// Index: [SECTION] Documents, [SECTION] Scenario, [SECTION] Frame, [SECTION] Scenario panel
#include "gui/viewer.hpp"

#include <algorithm>
#include <cstdio>

#include <imgui.h>

#include "run/scenario_loader.hpp"

namespace csim::gui {

bool parse_tab(const std::string& s, Tab* out) {
  if (s == "timeline")
    *out = Tab::kTimeline;
  else if (s == "memory")
    *out = Tab::kMemory;
  else if (s == "stats" || s == "statistics")
    *out = Tab::kStats;
  else if (s == "compare")
    *out = Tab::kCompare;
  else
    return false;
  return true;
}

// [SECTION] Documents
// -------------------------------------------------------------------------------

void Viewer::add_document(std::unique_ptr<Document> doc) {
  docs_.push_back(std::move(doc));
  variant_.push_back(false);
  activate(static_cast<int>(docs_.size()) - 1);
  compare_.fit_pending = true;
}

const Document* Viewer::active_document() const {
  return active_ >= 0 && active_ < static_cast<int>(docs_.size()) ? docs_[active_].get() : nullptr;
}

void Viewer::activate(int index) {
  active_ = index;
  selection_ = {};
  timeline_.collapse = {};
  timeline_.set_fit_pending(false);  // the viewer fits view_ itself, whichever tab is shown
  fit_pending_ = true;
}

void Viewer::show_range(double start_ns, double end_ns) {
  range_start_ns_ = start_ns;
  range_end_ns_ = end_ns;
}

bool Viewer::show_step(std::int64_t n) {
  const Document* d = active_document();
  if (d == nullptr) return false;
  for (const StepMark& s : d->timeline.steps) {
    if (s.n == n) {
      pending_step_ = n;
      return true;
    }
  }
  return false;
}

void Viewer::select_tab(Tab t) {
  tab_ = t;
  force_tab_ = true;
}

std::vector<const Document*> Viewer::compare_documents() const {
  std::vector<const Document*> v;
  for (std::size_t i = 0; i < docs_.size(); ++i) {
    if (variant_[i]) v.push_back(docs_[i].get());
  }
  if (v.empty()) {
    for (std::size_t i = 0; i < docs_.size() && v.size() < 3; ++i) v.push_back(docs_[i].get());
  }
  return v;
}

// [SECTION] Scenario
// --------------------------------------------------------------------------------

void Viewer::set_scenario(const std::string& path) {
  scenario_ = run::load_scenario(path);
  scenario_path_ = path;
  knobs_ = knobs_from(scenario_);
}

bool Viewer::simulate_scenario() {
  if (scenario_path_.empty()) return false;
  SimResult r = run_scenario(scenario_path_, knob_overrides(knobs_));
  sim_ok_ = r.ok;
  if (!r.ok) {
    sim_message_ = r.error;
    return false;
  }
  const double sim_s = r.seconds;
  auto doc = make_document(std::move(r.trace),
                           scenario_.name + " (" + kStrategyKinds[knobs_.strategy] + ")");
  char buf[160];
  std::snprintf(buf, sizeof buf, "simulated in %.3f s, models built in %.3f s: %zu events", sim_s,
                doc->index_s, doc->trace.events.size());
  sim_message_ = buf;
  if (scenario_doc_ >= 0 && scenario_doc_ < static_cast<int>(docs_.size())) {
    docs_[scenario_doc_] = std::move(doc);
    compare_.cache.clear();  // keyed by Document address, which a new document may reuse
    activate(scenario_doc_);
  } else {
    add_document(std::move(doc));
    scenario_doc_ = active_;
  }
  return true;
}

bool Viewer::run_variants() {
  if (scenario_path_.empty()) return false;
  // Drop the previous variants (indices shift, so rebuild the vectors).
  std::vector<std::unique_ptr<Document>> kept;
  std::vector<bool> kept_flags;
  int new_scenario_doc = -1;
  for (std::size_t i = 0; i < docs_.size(); ++i) {
    if (variant_[i]) continue;
    if (static_cast<int>(i) == scenario_doc_) new_scenario_doc = static_cast<int>(kept.size());
    kept.push_back(std::move(docs_[i]));
    kept_flags.push_back(false);
  }
  docs_ = std::move(kept);
  variant_ = std::move(kept_flags);
  compare_.cache.clear();  // keyed by Document address, which the new variants may reuse
  scenario_doc_ = new_scenario_doc;
  double total_s = 0;
  for (const Variant& v : launch_variants()) {
    std::vector<std::string> o = knob_overrides(knobs_);
    o.insert(o.end(), v.overrides.begin(), v.overrides.end());
    SimResult r = run_scenario(scenario_path_, o);
    if (!r.ok) {
      sim_ok_ = false;
      sim_message_ = v.label + ": " + r.error;
      return false;
    }
    total_s += r.seconds;
    docs_.push_back(make_document(std::move(r.trace), v.label));
    variant_.push_back(true);
  }
  activate(static_cast<int>(docs_.size()) - 3);
  sim_ok_ = true;
  char buf[96];
  std::snprintf(buf, sizeof buf, "3 variants simulated in %.3f s", total_s);
  sim_message_ = buf;
  compare_.fit_pending = true;
  select_tab(Tab::kCompare);
  return true;
}

// [SECTION] Frame
// -----------------------------------------------------------------------------------

void Viewer::draw_top_bar() {
  ImGui::TextColored(ImVec4(0.55f, 0.8f, 1, 1), "simview");
  ImGui::SameLine();
  const Document* d = active_document();
  if (d == nullptr) {
    ImGui::TextDisabled("no trace: simview TRACE.json ... or --scenario SCENARIO.json");
    return;
  }
  ImGui::SetNextItemWidth(300);
  if (ImGui::BeginCombo("##trace", d->label.c_str())) {
    for (std::size_t i = 0; i < docs_.size(); ++i) {
      if (ImGui::Selectable(docs_[i]->label.c_str(), static_cast<int>(i) == active_))
        activate(static_cast<int>(i));
    }
    ImGui::EndCombo();
  }
  ImGui::SameLine();
  ImGui::TextDisabled("%s  |  %zu events, %zu lanes, %zu processes  |  read %.2f s, indexed %.2f s",
                      d->stats.label.c_str(), d->timeline.event_count, d->timeline.lanes.size(),
                      d->timeline.gpus.size(), d->read_s, d->index_s);
  if (d->read_stats.skipped_records > 0) {
    ImGui::SameLine();
    ImGui::TextColored(ImVec4(1, 0.6f, 0.3f, 1), "| %lld bad records skipped (%s)",
                       static_cast<long long>(d->read_stats.skipped_records),
                       d->read_stats.first_problem.c_str());
  }
}

void Viewer::draw_timeline_tab() {
  const Document* d = active_document();
  draw_class_legend();
  ImGui::SameLine();
  ImGui::TextDisabled(
      "   wheel: zoom   drag: pan   right-drag: box zoom   F: fit   W/S A/D   shift+wheel: scroll");
  timeline_.selection = &selection_;
  const bool details = selection_.doc == d && selection_.event >= 0;
  const float details_h = details ? 170.0f : 0.0f;
  timeline_.draw(*d, &view_, ImGui::GetContentRegionAvail().y - details_h, "timeline");
  if (details) {
    ImGui::BeginChild("details", ImVec2(0, 0), true);
    const prof::TraceEvent& e = d->trace.events[selection_.event];
    ImGui::Columns(2, "details_cols", false);
    draw_details_table(event_details(d->trace, e, d->timeline.t_min, true), "details_table");
    ImGui::NextColumn();
    ImGui::Text("%zu flow%s (arrows):", selection_.flows.size(),
                selection_.flows.size() == 1 ? "" : "s");
    for (const int fi : selection_.flows) {
      const prof::FlowEvent& f = d->trace.flows[fi];
      const prof::ThreadInfo* from = d->trace.thread(f.from_pid, f.from_tid);
      const prof::ThreadInfo* to = d->trace.thread(f.to_pid, f.to_tid);
      ImGui::BulletText("%s: %s (pid %d) at %s -> %s (pid %d) at %s", f.name.c_str(),
                        from != nullptr ? from->name.c_str() : "?", f.from_pid,
                        format_time(static_cast<double>(f.from_ts_ns - d->timeline.t_min)).c_str(),
                        to != nullptr ? to->name.c_str() : "?", f.to_pid,
                        format_time(static_cast<double>(f.to_ts_ns - d->timeline.t_min)).c_str());
    }
    ImGui::Columns(1);
    ImGui::EndChild();
  }
}

void Viewer::frame(float width, float height) {
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(ImVec2(width, height));
  const ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove |
                                 ImGuiWindowFlags_NoBringToFrontOnFocus |
                                 ImGuiWindowFlags_NoSavedSettings;
  ImGui::Begin("simview", nullptr, flags);
  draw_top_bar();
  if (!scenario_path_.empty()) {
    ImGui::BeginChild("scenario", ImVec2(290, 0), true);
    draw_scenario_panel();
    ImGui::EndChild();
    ImGui::SameLine();
  }
  ImGui::BeginChild("main", ImVec2(0, 0), false);
  const Document* d = active_document();
  if (d != nullptr) {
    // The plot spans the content width minus the label column and the scrollbar.
    const float plot_w = std::max(
        ImGui::GetContentRegionAvail().x - timeline_.label_width - ImGui::GetStyle().ScrollbarSize,
        50.0f);
    if (fit_pending_) fit(&view_, 0, d->timeline.t_max - d->timeline.t_min, plot_w);
    fit_pending_ = false;
    for (const StepMark& s : d->timeline.steps) {
      if (s.n == pending_step_)
        show_range(static_cast<double>(s.start - d->timeline.t_min),
                   static_cast<double>(s.end - d->timeline.t_min));
    }
    pending_step_ = -1;
    if (range_end_ns_ > range_start_ns_) {
      fit(&view_, static_cast<TimeNs>(range_start_ns_), static_cast<TimeNs>(range_end_ns_), plot_w);
      compare_.view = view_;
      compare_.fit_pending = false;
      range_end_ns_ = -1;
    }
  }
  if (d != nullptr && ImGui::BeginTabBar("views")) {
    auto tab = [&](const char* name, Tab t) {
      const ImGuiTabItemFlags f = force_tab_ && tab_ == t ? ImGuiTabItemFlags_SetSelected : 0;
      const bool open = ImGui::BeginTabItem(name, nullptr, f);
      if (open) {
        if (!force_tab_) tab_ = t;
        ImGui::EndTabItem();
      }
    };
    tab("Timeline", Tab::kTimeline);
    tab("Memory", Tab::kMemory);
    tab("Statistics", Tab::kStats);
    tab("Compare", Tab::kCompare);
    ImGui::EndTabBar();
    force_tab_ = false;
    switch (tab_) {
      case Tab::kTimeline:
        draw_timeline_tab();
        break;
      case Tab::kMemory:
        draw_memory_view(*d, &view_, &memory_, timeline_.label_width);
        break;
      case Tab::kStats:
        draw_stats_view(*d);
        break;
      case Tab::kCompare:
        draw_compare_view(compare_documents(), &compare_, &selection_);
        break;
    }
  }
  ImGui::EndChild();
  ImGui::End();
}

// [SECTION] Scenario panel
// --------------------------------------------------------------------------

void Viewer::draw_scenario_panel() {
  ImGui::TextColored(ImVec4(0.55f, 0.8f, 1, 1), "Scenario");
  ImGui::TextWrapped("%s", scenario_.name.c_str());
  ImGui::TextDisabled("%d x %s", scenario_.cluster.world_gpus(),
                      scenario_.cluster.gpu.name.c_str());
  ImGui::Separator();
  bool changed = false;
  ImGui::PushItemWidth(150);
  changed |= ImGui::Combo("strategy", &knobs_.strategy, kStrategyKinds, kStrategyKindCount);
  ImGui::SliderInt("GPUs", &knobs_.gpus, 1, knobs_.max_gpus);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  const long long one = 1;
  ImGui::InputScalar("global batch", ImGuiDataType_S64, &knobs_.global_batch, &one);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  ImGui::SliderInt("micro-batches", &knobs_.micro_batches, 1, 64);
  changed |= ImGui::IsItemDeactivatedAfterEdit();
  if (knobs_.strategy == 2) {
    ImGui::SliderFloat("bucket MiB", &knobs_.bucket_cap_mb, 1, 512, "%.0f",
                       ImGuiSliderFlags_Logarithmic);
    changed |= ImGui::IsItemDeactivatedAfterEdit();
    changed |= ImGui::Checkbox("thread launcher (what-if)", &knobs_.ddp_threads);
  }
  changed |= ImGui::Checkbox(gil_checkbox_label(knobs_.gil), &knobs_.gil);
  ImGui::PopItemWidth();
  knobs_.global_batch = std::max<long long>(knobs_.global_batch, 1);
  ImGui::Checkbox("re-simulate on change", &auto_simulate_);
  if (ImGui::Button("Simulate") || (changed && auto_simulate_)) {
    simulate_scenario();
  }
  ImGui::SameLine();
  if (ImGui::Button("Reset")) knobs_ = knobs_from(scenario_);
  if (ImGui::Button("Run launch / GIL variants")) run_variants();
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "DataParallel with the GIL, DataParallel free-threaded (host.gil=false),\n"
        "DDP with one process per GPU: side by side in Compare");
  }
  if (!sim_message_.empty()) {
    ImGui::Separator();
    ImGui::PushTextWrapPos(0);
    if (sim_ok_)
      ImGui::TextDisabled("%s", sim_message_.c_str());
    else
      ImGui::TextColored(ImVec4(1, 0.4f, 0.35f, 1), "%s", sim_message_.c_str());
    ImGui::PopTextWrapPos();
  }
  ImGui::Separator();
  ImGui::TextDisabled("overrides (simrun --set):");
  for (const std::string& o : knob_overrides(knobs_)) ImGui::BulletText("%s", o.c_str());
}

}  // namespace csim::gui
