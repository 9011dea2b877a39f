// What a profiler shows: the per-op table and the Chrome trace.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iterator>

#include "core/atomic_file.h"
#include "runtime/profiler_internal.h"

namespace baton {
namespace {

std::string byte_text(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

// "a.cpp:12 80%, b.cpp:30 20%": the row's first `top` lines and their share of its time.
std::string lines_text(const ProfileRow& row, size_t top) {
  std::string out;
  for (size_t i = 0; i < row.lines.size() && i < top; ++i) {
    char share[16];
    std::snprintf(share, sizeof share, " %.0f%%", row.total_ms > 0 ? 100 * row.lines[i].second / row.total_ms : 0);
    out += (i ? ", " : "") + row.lines[i].first + share;
  }
  if (row.lines.size() > top) out += str(", +", row.lines.size() - top, " more");
  return out;
}

// Appends `text` as a JSON string.
void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", unsigned(c));
      out += esc;
    } else {
      out += c;
    }
  }
  out += '"';
}

void append_event(std::string& out, const Profiler::State& s, const runtime::RecordedEvent& e, long pid) {
  char buf[160];
  out += "{\"name\":";
  append_json_string(out, s.strings[e.name]);
  std::snprintf(buf, sizeof buf, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%ld,\"tid\":%u",
                e.planned ? "plan step" : "eager", double(e.start_ns) / 1e3, double(e.duration_ns) / 1e3, pid,
                e.thread);
  out += buf;
  out += ",\"args\":{\"file\":";
  const std::string& file = s.strings[e.file];
  append_json_string(out, file.empty() ? std::string("-") : str(file, ":", e.line));
  std::snprintf(buf, sizeof buf, ",\"input_bytes\":%llu,\"output_bytes\":%llu,\"bytes\":%llu,\"flops\":%.0f}}",
                (unsigned long long)e.input_bytes, (unsigned long long)e.output_bytes,
                (unsigned long long)(e.input_bytes + e.output_bytes), e.flops);
  out += buf;
}

std::string chrome_trace(const Profiler::State& s) {
  const long pid = long(::getpid());
  std::string out = str("{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"baton\",\"dropped_events\":",
                        s.dropped, "},\"traceEvents\":[\n");
  for (size_t i = 0; i < s.events.size(); ++i) {
    if (i) out += ",\n";
    append_event(out, s, s.events[i], pid);
  }
  out += "\n]}\n";
  return out;
}

}  // namespace

std::string Profiler::table(size_t top_lines) const {
  std::vector<ProfileRow> rows = this->rows();
  double total_ms = 0;
  size_t width = 22;
  for (const ProfileRow& r : rows) {
    total_ms += r.total_ms;
    width = std::max(width, r.name.size());
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-*s %8s %11s %7s %9s %10s %10s  %s\n", int(width), "op", "calls", "total ms",
                "share", "GFLOP/s", "bytes in", "bytes out", "top source lines");
  std::string out = line;
  for (const ProfileRow& r : rows) {
    const double gflops = r.flops > 0 && r.total_ms > 0 ? r.flops / (r.total_ms * 1e6) : 0;
    std::snprintf(line, sizeof line, "%-*s %8lld %11.3f %6.1f%% %9.1f %10s %10s  ", int(width), r.name.c_str(),
                  (long long)r.calls, r.total_ms, total_ms > 0 ? 100 * r.total_ms / total_ms : 0, gflops,
                  byte_text(r.input_bytes).c_str(), byte_text(r.output_bytes).c_str());
    out += line + lines_text(r, top_lines) + "\n";
  }
  if (size_t dropped = dropped_events())
    out += str("(", dropped, " calls past max_events are counted here but missing from the trace)\n");
  return out;
}

void Profiler::write_chrome_trace(const std::string& path) const {
  std::string json;
  {
    std::lock_guard lock(runtime::profiler_mutex());
    json = chrome_trace(*state_);
  }
  detail::write_file_atomically(path, json, "profiler");
}

}  // namespace baton
