// ptxrag's run-time monitor for the candidate process (loaded by runner.py, never by the candidate).
//
// CUPTI activity records say on which stream every kernel, copy and memset of a call ran and when. The
// runner brackets each ptxrag_launch call with ptxrag_monitor_begin(args->stream) and, after the stream
// has been synchronised, ptxrag_monitor_end(): it flushes the records and counts the activities that ran
// on another stream, and those that started after the call's work was complete (work a host thread
// enqueued after ptxrag_launch returned). Records of activities seen after end() are charged to the next
// call, so late work cannot hide between calls.
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Activity {
  const char *what;  // "kernel", "memcpy", "memset"
  uint32_t stream;
  uint64_t start;
  uint64_t end;
  std::string name;
  bool marker;  // the runner's 4-byte memset issued right after ptxrag_launch returned
};

std::mutex g_mu;
std::vector<Activity> g_records;
bool g_started = false;
std::string g_error;

constexpr size_t kBufferBytes = 4u << 20;
constexpr uint32_t kMarkerValue = 0xA5;  // runner.py MARKER_VALUE

void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *size = kBufferBytes;
  *buffer = static_cast<uint8_t *>(aligned_alloc(8, kBufferBytes));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t valid) {
  CUpti_Activity *rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        auto *k = reinterpret_cast<CUpti_ActivityKernel10 *>(rec);
        g_records.push_back({"kernel", k->streamId, k->start, k->end, k->name ? k->name : "?", false});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        auto *m = reinterpret_cast<CUpti_ActivityMemcpy6 *>(rec);
        g_records.push_back({"memcpy", m->streamId, m->start, m->end, "memcpy", false});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        auto *m = reinterpret_cast<CUpti_ActivityMemset4 *>(rec);
        bool marker = m->bytes == 4 && m->value == kMarkerValue;
        g_records.push_back({"memset", m->streamId, m->start, m->end, "memset", marker});
        break;
      }
      default:
        break;
    }
  }
  free(buffer);
}

bool ok(CUptiResult r, const char *what) {
  if (r == CUPTI_SUCCESS) return true;
  const char *s = nullptr;
  cuptiGetResultString(r, &s);
  g_error = std::string(what) + ": " + (s ? s : "unknown CUPTI error");
  return false;
}

uint32_t g_expected = 0;
uint64_t g_begin_ts = 0;

}  // namespace

extern "C" {

// Enable the activity kinds; call once, after the CUDA context exists and before the candidate is loaded.
int ptxrag_monitor_start(void) {
  if (g_started) return 0;
  if (!ok(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks")) return 1;
  if (!ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernel records")) return 1;
  if (!ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpy records")) return 1;
  if (!ok(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memset records")) return 1;
  g_started = true;
  return 0;
}

const char *ptxrag_monitor_error(void) { return g_error.c_str(); }

// Switch the records on or off between calls (they slow each kernel by about 0.15 ms on an H200, so the
// timed loop records a random subset of its repetitions and leaves those out of the median).
int ptxrag_monitor_enable(int on) {
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET};
  for (auto k : kinds) {
    if (!ok(on ? cuptiActivityEnable(k) : cuptiActivityDisable(k), on ? "enable records" : "disable records"))
      return 1;
  }
  return 0;
}

uint64_t ptxrag_monitor_now(void) {
  uint64_t ts = 0;
  cuptiGetTimestamp(&ts);
  return ts;
}

// Start a call's window: the records so far are flushed and kept for end() (late work of the previous
// call is still charged), the expected stream is the call's args->stream.
int ptxrag_monitor_begin(void *stream) {
  if (!ok(cuptiGetStreamIdEx(nullptr, static_cast<CUstream>(stream), 0, &g_expected), "stream id")) return 1;
  g_begin_ts = ptxrag_monitor_now();
  return 0;
}

// After args->stream was synchronised (at device time done_ts): flush, judge, clear. Writes a one-line
// summary into out and returns the number of offending activities (-1 on a CUPTI error).
int ptxrag_monitor_end(uint64_t done_ts, char *out, int out_len) {
  if (!ok(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush")) return -1;
  std::lock_guard<std::mutex> lock(g_mu);
  int bad = 0, on_stream = 0;
  std::string first;
  // the first marker on the call's stream: everything on that stream after it was enqueued after the
  // call returned (a candidate's own 4-byte memset of the same value only moves the mark earlier)
  uint64_t mark = done_ts;
  bool marked = false;
  for (const auto &a : g_records) {
    if (a.marker && a.stream == g_expected && !marked) {
      mark = a.start;
      marked = true;
    }
  }
  for (const auto &a : g_records) {
    if (a.marker && a.stream == g_expected && a.start == mark) continue;
    bool off = a.stream != g_expected;
    bool late = a.start > mark || a.start > done_ts;
    bool early = a.start < g_begin_ts;  // enqueued before this call began: previous call's late work
    if (off || late || early) {
      if (bad == 0) {
        char line[512];
        snprintf(line, sizeof line, "%s %.200s ran %s", a.what, a.name.c_str(),
                 off ? "on another stream than args->stream"
                     : (late ? "after the call's work was complete (enqueued after ptxrag_launch returned?)"
                             : "before the call began (left running by an earlier call)"));
        first = line;
      }
      ++bad;
    } else {
      ++on_stream;
    }
  }
  snprintf(out, out_len, "%d activities on args->stream, %d elsewhere or late%s%s", on_stream, bad,
           bad ? ": first: " : "", first.c_str());
  g_records.clear();
  return bad;
}

}  // extern "C"
