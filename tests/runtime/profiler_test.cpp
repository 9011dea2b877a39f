// The profiler: one event per eager op call and per step of a plan, with the user's
// file:line; a Chrome trace that parses as JSON; the table; step times in explain();
// several threads and profilers at once; a failed trace write leaves no file.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "baton/baton.h"
#include "harness/failing_disk.h"
#include "harness/op_harness.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

// --- a tiny JSON reader: enough to check that a trace is well-formed JSON ----------------

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> fields;

  const Json* find(const std::string& key) const {
    for (auto& [k, v] : fields)
      if (k == key) return &v;
    return nullptr;
  }
  const Json& at(const std::string& key) const {
    const Json* v = find(key);
    if (!v) throw std::runtime_error("no field " + key);
    return *v;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  // The one value `s` holds; throws std::runtime_error on anything else.
  Json document() {
    Json v = value();
    skip_space();
    if (pos_ != s_.size()) fail("text after the value");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("bad JSON at " + std::to_string(pos_) + ": " + why);
  }
  void skip_space() {
    while (pos_ < s_.size() && std::strchr(" \t\r\n", s_[pos_])) ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }
  bool take_word(const char* w) {
    const size_t n = std::strlen(w);
    if (s_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  std::string string_value() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) fail("unfinished escape");
      char e = s_[pos_++];
      if (e == 'u') {
        if (pos_ + 4 > s_.size()) fail("short \\u escape");
        out += char(std::stoi(s_.substr(pos_, 4), nullptr, 16));
        pos_ += 4;
      } else if (std::strchr("\"\\/", e)) {
        out += e;
      } else if (e == 'n') {
        out += '\n';
      } else if (e == 't') {
        out += '\t';
      } else if (!std::strchr("bfr", e)) {
        fail("unknown escape");
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }
  Json value() {
    skip_space();
    if (pos_ >= s_.size()) fail("missing value");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Object;
      ++pos_;
      if (take('}')) return v;
      do {
        skip_space();
        std::string key = string_value();
        expect(':');
        v.fields.emplace_back(std::move(key), value());
      } while (take(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Array;
      ++pos_;
      if (take(']')) return v;
      do v.items.push_back(value());
      while (take(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::String;
      v.text = string_value();
    } else if (take_word("true") || take_word("false")) {
      v.kind = Json::Bool;
    } else if (take_word("null")) {
      v.kind = Json::Null;
    } else {
      v.kind = Json::Number;
      const char* start = s_.c_str() + pos_;
      char* end = nullptr;
      v.number = std::strtod(start, &end);
      if (end == start || !std::strchr("-0123456789", *start)) fail("not a value");
      pos_ += size_t(end - start);
    }
    return v;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

// --- helpers -------------------------------------------------------------------------

class ProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = fs::temp_directory_path() / ("baton_profiler_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  // The trace's complete events, after checking the document's shape.
  std::vector<Json> trace_events(const Profiler& p) {
    const fs::path path = dir / "trace.json";
    p.write_chrome_trace(path.string());
    Json doc = JsonReader(read(path)).document();
    EXPECT_EQ(doc.kind, Json::Object);
    const Json& events = doc.at("traceEvents");
    EXPECT_EQ(events.kind, Json::Array);
    std::vector<Json> complete;
    for (const Json& e : events.items) {
      if (e.at("ph").text != "X") continue;
      EXPECT_GE(e.at("dur").number, 0);
      EXPECT_GE(e.at("ts").number, 0);
      EXPECT_EQ(e.at("pid").kind, Json::Number);
      EXPECT_EQ(e.at("tid").kind, Json::Number);
      EXPECT_EQ(e.at("args").at("bytes").kind, Json::Number);
      EXPECT_EQ(e.at("args").at("flops").kind, Json::Number);
      complete.push_back(e);
    }
    return complete;
  }
  size_t files_in_dir() {
    size_t n = 0;
    for (auto& e : fs::directory_iterator(dir)) n += e.is_regular_file();
    return n;
  }

  fs::path dir;
};

const std::string kThisFile = "profiler_test.cpp";
std::string here(int line) { return kThisFile + ":" + std::to_string(line); }

Tensor uniform(const Shape& shape, uint64_t seed = 1) { return testing::uniform(shape, -1, 1, seed).to(f32); }

// --- eager ---------------------------------------------------------------------------

TEST_F(ProfilerTest, OneEventPerEagerCallWithTheCallersLine) {
  Tensor a = uniform({8, 16}), b = uniform({16, 4}, 2);
  Profiler p;
  const int line = __LINE__ + 1;
  Tensor c = matmul(a, b);
  Tensor d = relu(c);
  p.stop();
  Tensor ignored = relu(d);  // not recorded: stopped

  std::vector<ProfileEvent> events = p.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].name, "matmul");
  EXPECT_EQ(events[1].name, "relu");
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(events[i].file, kThisFile);
    EXPECT_EQ(events[i].line, line + int(i));
    EXPECT_FALSE(events[i].planned);
    EXPECT_GE(events[i].duration_us, 0);
    EXPECT_GT(events[i].thread, 0u);
  }
  EXPECT_EQ(events[0].input_bytes, (8 * 16 + 16 * 4) * 4u);
  EXPECT_EQ(events[0].output_bytes, 8 * 4 * 4u);
  EXPECT_EQ(events[0].flops, 2.0 * 8 * 16 * 4);  // matmul's cost rule

  std::vector<Json> trace = trace_events(p);
  ASSERT_EQ(trace.size(), 2u);
  EXPECT_EQ(trace[0].at("name").text, "matmul");
  EXPECT_EQ(trace[0].at("cat").text, "eager");
  EXPECT_EQ(trace[0].at("args").at("file").text, here(line));
  EXPECT_EQ(trace[1].at("args").at("file").text, here(line + 1));
}

TEST_F(ProfilerTest, TableNamesTheOpsAndTheirLines) {
  Tensor a = uniform({32, 32});
  Profiler p;
  const int line = __LINE__ + 2;
  for (int i = 0; i < 3; ++i) {
    Tensor b = matmul(a, a);
    Tensor c = tanh(b);
  }
  std::vector<ProfileRow> rows = p.rows();
  ASSERT_EQ(rows.size(), 2u);
  for (const ProfileRow& r : rows) {
    EXPECT_EQ(r.calls, 3);
    ASSERT_EQ(r.lines.size(), 1u);
  }
  const std::string table = p.table();
  EXPECT_NE(table.find("matmul"), std::string::npos) << table;
  EXPECT_NE(table.find("tanh"), std::string::npos) << table;
  EXPECT_NE(table.find(here(line) + " 100%"), std::string::npos) << table;
  EXPECT_NE(table.find(here(line + 1) + " 100%"), std::string::npos) << table;
  EXPECT_NE(table.find("GFLOP/s"), std::string::npos) << table;
}

TEST_F(ProfilerTest, EventsPastTheLimitStillCountInTheTable) {
  Tensor a = uniform({4});
  Profiler p({.max_events = 2});
  for (int i = 0; i < 5; ++i) a = neg(a);
  EXPECT_EQ(p.events().size(), 2u);
  EXPECT_EQ(p.dropped_events(), 3u);
  EXPECT_EQ(p.rows().at(0).calls, 5);
  EXPECT_EQ(trace_events(p).size(), 2u);
  p.clear();
  EXPECT_TRUE(p.events().empty());
  EXPECT_TRUE(p.rows().empty());
}

// --- plans ---------------------------------------------------------------------------

TEST_F(ProfilerTest, OneEventPerStepOfASessionRunWithTheNodesLine) {
  Graph g("chain");
  Tensor x = g.placeholder(f32, {"n", 16}, "x");
  Tensor w = uniform({16, 16});
  const int line = __LINE__ + 1;
  Tensor h = relu(matmul(x, w) * 2.0);
  Tensor y = tanh(h + 1.0);
  Session sess(g);
  Tensor input = uniform({4, 16}, 3);
  sess.run({y}, {{x, input}});  // plans (passes may run kernels) before profiling
  EXPECT_EQ(sess.explain().find(" ms "), std::string::npos);

  Profiler p;
  sess.run({y}, {{x, input}});
  p.stop();
  const size_t steps = sess.memory_plan().steps;
  ASSERT_GT(steps, 0u);
  std::vector<Json> trace = trace_events(p);
  EXPECT_EQ(trace.size(), steps);
  size_t planned = 0;
  for (const Json& e : trace) {
    planned += e.at("cat").text == "plan step";
    const std::string& where = e.at("args").at("file").text;
    EXPECT_TRUE(where == here(line) || where == here(line + 1)) << where;
  }
  EXPECT_EQ(planned, steps);

  // explain() now shows each step's time.
  const std::string report = sess.explain();
  EXPECT_NE(report.find("over 1 run(s)"), std::string::npos) << report;
  EXPECT_NE(report.find(" ms "), std::string::npos) << report;
}

TEST_F(ProfilerTest, OneEventPerStepOfACompiledCall) {
  auto f = compile([](Tensor x, Tensor w) {
    return sigmoid(matmul(x, w) - 0.5);
  });
  const int line = __LINE__ - 2;
  Tensor x = uniform({3, 8}), w = uniform({8, 5}, 2);
  f(x, w);  // traces and plans
  {
    Profiler p;
    f(x, w);
    f(x, w);
    std::vector<Json> trace = trace_events(p);
    EXPECT_EQ(trace.size(), 2 * f.memory_plan().steps);
    for (const Json& e : trace) EXPECT_EQ(e.at("args").at("file").text, here(line));
    for (const ProfileEvent& e : p.events()) EXPECT_TRUE(e.planned);
  }
  // The profiler is gone; its step times stay for explain().
  const std::string report = f.explain();
  EXPECT_NE(report.find("over 2 run(s)"), std::string::npos) << report;
}

// --- threads -------------------------------------------------------------------------

// Eager ops on 8 threads while profilers start, stop, report and end on another: no
// crash, and the profiler alive throughout sees every call.
TEST_F(ProfilerTest, ManyThreadsAndProfilersAtOnce) {
  constexpr int kThreads = 8, kCalls = 200;
  Profiler whole;
  std::atomic<bool> done{false};
  std::thread churn([&] {
    while (!done.load()) {
      Profiler p;
      (void)p.table();
      p.stop();
      p.start();
      (void)p.events();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t)
    workers.emplace_back([t] {
      Tensor a = uniform({16}, uint64_t(t + 1));
      for (int i = 0; i < kCalls; ++i) a = tanh(a);
    });
  for (std::thread& w : workers) w.join();
  done = true;
  churn.join();
  whole.stop();
  std::vector<ProfileEvent> events = whole.events();
  size_t tanh_calls = 0;
  std::set<uint32_t> threads;
  for (const ProfileEvent& e : events)
    if (e.name == "tanh") {
      ++tanh_calls;
      threads.insert(e.thread);
    }
  EXPECT_EQ(tanh_calls, size_t(kThreads * kCalls));
  EXPECT_EQ(threads.size(), size_t(kThreads));
  EXPECT_EQ(trace_events(whole).size(), events.size());
}

// --- writing -------------------------------------------------------------------------

TEST_F(ProfilerTest, AnUnwritableFolderIsAnIOErrorAndLeavesNoFile) {
  Profiler p;
  relu(uniform({4}));
  EXPECT_THROWS_WITH(IOError, p.write_chrome_trace((dir / "missing" / "t.json").string()), "cannot create");
  EXPECT_FALSE(fs::exists(dir / "missing"));
}

// A write that fails midway (a file-size limit in a child process) leaves the previous
// trace as it was and no temporary file.
TEST_F(ProfilerTest, AFailedWriteLeavesNoPartialFile) {
  const fs::path path = dir / "trace.json";
  Tensor a = uniform({4});
  Profiler p;
  a = relu(a);
  p.write_chrome_trace(path.string());
  const std::string before = read(path);
  for (int i = 0; i < 200; ++i) a = relu(a);  // a trace well past the limit
  p.stop();
  EXPECT_TRUE(testing::write_fails_with_io_error_past_size_limit([&] { p.write_chrome_trace(path.string()); }));
  EXPECT_EQ(read(path), before);
  EXPECT_EQ(files_in_dir(), 1u);
}

}  // namespace
}  // namespace baton
