// The plan report: source line -> node -> step -> time (when profiled) -> buffer, in one place.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "core/allocator.h"
#include "core/tensor_impl.h"
#include "runtime/plan.h"
#include "runtime/profiler_internal.h"

namespace baton::runtime {
namespace {

std::string kib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  return buf;
}

std::string where(const graph::Node& n) {
  return n.loc.known() ? str(n.loc.file, ":", n.loc.line) : std::string("-");
}

std::string placement(const ValueInfo& v) {
  switch (v.placement) {
    case Placement::Arena: {
      const bool nhwc = v.shape.size() == 4 && v.strides != contiguous_strides(v.shape);
      const bool column_major = v.shape.size() == 2 && v.strides != contiguous_strides(v.shape);
      const std::string layout = v.channel_block ? str(", nChw", v.channel_block, "c")
                                 : nhwc          ? ", channels-last"
                                 : column_major  ? ", column-major"
                                                 : "";
      return str("arena +", v.offset, " (", v.bytes, " B", layout, ")");
    }
    case Placement::Fresh: return str("own buffer (", v.bytes, " B)");
    case Placement::View: return "view";
    case Placement::Input: return "input";
  }
  return "";
}

void passes_section(const Plan& plan, std::string& out) {
  out += plan.pass_log.empty() ? "passes: none changed the graph\n" : "passes:\n";
  for (const passes::Effect& e : plan.pass_log) {
    out += str("  ", e.pass, ": ", e.nodes_before, " -> ", e.nodes_after, " nodes\n");
    for (const std::string& d : e.details) out += str("    ", d, "\n");
  }
}

// The time the last profiler recorded for each step; empty when it recorded none of them.
std::vector<std::optional<StepTime>> step_times(const Plan& plan) {
  std::vector<std::optional<StepTime>> times;
  bool any = false;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    times.push_back(profiled_step_time(&plan, i, plan.steps[i].node->op_name()));
    any = any || times.back();
  }
  if (!any) times.clear();
  return times;
}

// "   0.123 ms" for a profiled step, blanks for one the profiler did not see.
std::string time_column(const std::optional<StepTime>& t) {
  char buf[32];
  if (t) std::snprintf(buf, sizeof buf, "%9.3f ms ", double(t->ns) / 1e6);
  else std::snprintf(buf, sizeof buf, "%12s ", "-");
  return buf;
}

void steps_section(const Plan& plan, const Specialization* stage_spec, std::string& out) {
  const std::vector<std::optional<StepTime>> times = step_times(plan);
  int64_t runs = 0;
  for (const std::optional<StepTime>& t : times) runs = t ? std::max(runs, t->calls) : runs;
  out += str("steps: ", plan.steps.size());
  out += times.empty() ? "\n" : str(" (time: the profiler's total over ", runs, " run(s))\n");
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const graph::Node& n = *plan.steps[i].node;
    // A staged plan's last specialization covers its last stage (plan.h, "Stages").
    const Specialization* spec = stage_spec && i >= stage_spec->begin && i < stage_spec->end ? stage_spec : nullptr;
    char head[96];
    std::snprintf(head, sizeof head, "  %4zu  %-22s %-20s ", i, n.op_name().c_str(), where(n).c_str());
    std::string line = head;
    if (!times.empty()) line += time_column(times[i]);
    for (size_t k = 0; k < plan.steps[i].outputs.size(); ++k) {
      if (k) line += "; ";
      if (!spec) {
        line += str(n.output(k)->type);
        continue;
      }
      const ValueInfo& v = spec->values[size_t(plan.steps[i].outputs[k])];
      line += str(v.dtype, v.shape, " ", placement(v));
    }
    if (spec && spec->steps[i].scratch_offset >= 0)
      line += str(", scratch +", spec->steps[i].scratch_offset, " (", spec->steps[i].prepared.scratch_bytes, " B)");
    if (spec && !spec->steps[i].prepared.implementation.empty())
      line += str("  [", spec->steps[i].prepared.implementation, "]");
    if (spec && spec->parallel && spec->parallel->workers > 1)
      line += str("  worker ", int(spec->parallel->lists.list_of[i]));
    out += line + "\n";
  }
}

// How the steps were spread over the workers, and what the cost model expected of it.
std::string parallel_line(const ParallelSchedule& p) {
  char estimate[128];
  if (p.workers == 1) {
    std::snprintf(estimate, sizeof estimate, "estimated %.1f us spread, %.1f us on one", p.spread_us, p.sequential_us);
    return str("side by side: one worker (", estimate, ")\n");
  }
  std::snprintf(estimate, sizeof estimate, "estimated %.1f us against %.1f us on one", p.estimated_us, p.sequential_us);
  return str("side by side: ", p.workers, " workers (", p.strategy, "), ", estimate, "; ", p.lists.segments(),
             " segments another worker may take\n");
}

// MemoryPlan::constant_bytes: the constants still holding their values (released ones are
// metadata) and the steps' copies of constant inputs.
size_t constant_bytes(const Plan& plan, const Specialization& spec) {
  size_t bytes = 0;
  for (const auto& [tensor, slot] : plan.constants)
    if (const auto& storage = tensor.impl()->storage) bytes += detail::size_class(storage->nbytes());
  for (size_t i = spec.begin; i < spec.end; ++i) bytes += spec.steps[i].prepared.constant_copy_bytes;
  return bytes;
}

}  // namespace

std::string explain(const Plan& plan) {
  std::string out;
  passes_section(plan, out);
  std::shared_ptr<const Specialization> spec = plan.last_specialization();
  if (spec)
    out += str("memory: arena ", kib(spec->arena.arena_bytes), ", one buffer each ", kib(spec->arena.naive_bytes),
               ", lower bound ", kib(spec->arena.lower_bound_bytes), "; constants ", kib(constant_bytes(plan, *spec)),
               "\n");
  if (plan.ordered_peak_bytes < plan.program_peak_bytes)
    out += str("order: fewest bytes first, estimated peak ", kib(size_t(plan.ordered_peak_bytes)),
               " against ", kib(size_t(plan.program_peak_bytes)), " in program order\n");
  if (plan.intra_op_threads > 0) out += str("intra-op threads: ", plan.intra_op_threads, " per worker\n");
  if (spec && spec->parallel) out += parallel_line(*spec->parallel);
  steps_section(plan, spec.get(), out);
  return out;
}

MemoryPlan memory_plan(const Plan& plan) {
  std::shared_ptr<const Specialization> spec = plan.last_specialization();
  if (!spec) return {};
  return {spec->arena.arena_bytes, spec->arena.naive_bytes, spec->arena.lower_bound_bytes, plan.steps.size(),
          constant_bytes(plan, *spec)};
}

}  // namespace baton::runtime
