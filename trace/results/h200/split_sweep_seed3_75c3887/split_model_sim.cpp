// Prototype of a context-aware split-planner model (not the shipped planner):
// a fluid simulation of stage 8's grid (CTAs dispatched in blockIdx order onto
// SMs x CTAs-per-SM slots, each a fixed latency then its bytes at
// min(per-CTA rate, HBM share)), from each sequence's own length. Reads the
// text from to_text.py (env SHAPES). "current" replays the shipped planner;
// "sim k=v..." scores the model at the split counts each sweep timed.
// kernels/NOTES.md, "A context-aware planner model", has the results.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <queue>
#include <sstream>
#include <string>
#include <vector>
using namespace std;

struct Pt { int s, sb; double us; };
struct Shape {
  string tag; int idx, sm; double dram; int units, hs, bs, eb, bps, cps, planned;
  vector<int> ctx; vector<Pt> pts;
};

static int cdiv(long a, long b) { return (a + b - 1) / b; }

// current planner (copy of optimized_split.hpp), returns splits
int current_plan(const Shape& a, const double* K) {
  double kCtaBw = K[0], kSmBw = K[1], kT0 = K[2], kM0 = K[3], kM1 = K[4];
  int maxctx = *max_element(a.ctx.begin(), a.ctx.end());
  int bps = a.bps, blocks = cdiv(maxctx, a.bs);
  int max_splits = min(256, cdiv(blocks, bps));
  auto sbf = [&](int s) { return cdiv(cdiv(blocks, s), bps) * bps; };
  double kHbm = 0.9 * a.dram * 1e9;
  long base = (long)a.ctx.size() * a.units, slots = (long)a.sm * a.cps;
  double block_bytes = 2.0 * a.hs * a.bs * a.eb;
  double merge_waves = (double)((base + slots - 1) / slots);
  double best = 1e300; int best_s = 1;
  for (int s = 1; s <= max_splits; ++s) {
    int sb = sbf(s), se = cdiv(blocks, sb);
    if (se != s) continue;
    long ctas = base * se, layers = (ctas + a.sm - 1) / a.sm;
    if (se > 1 && ctas > a.sm && ctas < 0.95 * layers * a.sm) continue;
    auto wave = [&](long n) {
      double cb = sb * block_bytes;
      double hbm = kHbm * min(1.0, 0.9 + 0.1 * (double)n / slots);
      double per_sm = (double)((n + a.sm - 1) / a.sm);
      return max({kT0 + cb / kCtaBw, n * cb / hbm, per_sm * cb / kSmBw});
    };
    double t = (double)(ctas / slots) * wave(slots);
    if (ctas % slots) t += wave(ctas % slots);
    if (se > 1) t += (kM0 + kM1 * se) * merge_waves;
    if (t < best * 0.999) { best = t; best_s = se; }
  }
  return best_s;
}

// Fluid simulation. P: [0]=ctaBw GB/s, [1]=hbm frac of dram, [2]=T0 us, [3]=E us (empty CTA),
// [4]=M0 us, [5]=M1 us
struct Params { double cta_bw, hbm_frac, t0, e, m0, m1; };

double simulate(const Shape& a, int sb, const Params& P, bool use_ctx) {
  int maxctx = *max_element(a.ctx.begin(), a.ctx.end());
  int blocks_max = cdiv(maxctx, a.bs);
  int S = cdiv(blocks_max, sb);
  double block_bytes = 2.0 * a.hs * a.bs * a.eb;
  double hbm = P.hbm_frac * a.dram * 1e3;  // bytes per us
  double ctabw = P.cta_bw * 1e3;           // bytes per us
  long slots = (long)a.sm * a.cps;
  // CTA list in dispatch order: (bytes, latency)
  struct C { double bytes, lat; };
  vector<C> list;
  for (size_t i = 0; i < a.ctx.size(); ++i) {
    int B = use_ctx ? cdiv(a.ctx[i], a.bs) : blocks_max;
    int n = cdiv(B, sb);
    for (int u = 0; u < a.units; ++u)
      for (int k = 0; k < S; ++k) {
        int blk = min(sb, max(0, B - k * sb));
        if (blk == 0) { list.push_back({0, P.e}); continue; }
        double lat = P.t0;
        // the merge: charged to the last split of each group (approximation: k == n-1)
        if (S > 1 && k == n - 1) lat += P.m0 + P.m1 * n;
        list.push_back({blk * block_bytes, lat});
      }
  }
  // events: latency phase (real time), data phase (processor sharing)
  double now = 0, prog = 0;  // prog: bytes delivered per active data CTA
  priority_queue<double, vector<double>, greater<double>> data_end;  // progress
  priority_queue<pair<double, double>, vector<pair<double, double>>, greater<>> latq;  // (end time, bytes)
  size_t next = 0;
  long running = 0;
  auto start = [&]() {
    const C& c = list[next++];
    ++running;
    latq.push({now + c.lat, c.bytes});
  };
  while (next < list.size() && running < slots) start();
  while (running > 0) {
    long active = data_end.size();
    double rate = active ? min(ctabw, hbm / active) : 0;
    double t_lat = latq.empty() ? 1e300 : latq.top().first;
    double t_data = active ? now + (data_end.top() - prog) / rate : 1e300;
    if (t_lat <= t_data) {
      if (active) prog += (t_lat - now) * rate;
      now = t_lat;
      double b = latq.top().second; latq.pop();
      if (b <= 0) { --running; if (next < list.size()) start(); }
      else data_end.push(prog + b);
    } else {
      prog = data_end.top();
      now = t_data;
      data_end.pop();
      --running;
      if (next < list.size()) start();
    }
  }
  return now;
}

vector<Shape> load() {
  ifstream f(getenv("SHAPES") ? getenv("SHAPES") : "shapes.txt");
  vector<Shape> v; string line;
  while (getline(f, line)) {
    istringstream is(line); Shape s; int nc, np;
    is >> s.tag >> s.idx >> s.sm >> s.dram >> s.units >> s.hs >> s.bs >> s.eb >> s.bps >> s.cps >> s.planned >> nc;
    s.ctx.resize(nc); for (auto& c : s.ctx) is >> c;
    is >> np; s.pts.resize(np); for (auto& p : s.pts) is >> p.s >> p.sb >> p.us;
    v.push_back(s);
  }
  return v;
}

int main(int argc, char** argv) {
  auto shapes = load();
  string mode = argc > 1 ? argv[1] : "current";
  if (mode == "current") {
    double K[5] = {30e9, 35e9, 2e-6, 2e-6, 0.5e-6};
    int ok = 0;
    for (auto& s : shapes) {
      int p = current_plan(s, K);
      ok += p == s.planned;
      if (p != s.planned) printf("mismatch %s %d: %d vs %d\n", s.tag.c_str(), s.idx, p, s.planned);
    }
    printf("reproduced %d of %zu\n", ok, shapes.size());
    return 0;
  }
  // sim mode: params from argv
  Params P{30, 0.9, 2, 1, 2, 0.5};
  bool use_ctx = true; int verbose = 0;
  for (int i = 2; i < argc; ++i) {
    string a = argv[i]; auto eq = a.find('='); string k = a.substr(0, eq); double v = atof(a.c_str() + eq + 1);
    if (k == "cta") P.cta_bw = v; else if (k == "hbm") P.hbm_frac = v; else if (k == "t0") P.t0 = v;
    else if (k == "e") P.e = v; else if (k == "m0") P.m0 = v; else if (k == "m1") P.m1 = v;
    else if (k == "ctx") use_ctx = v != 0; else if (k == "v") verbose = v;
  }
  int within[2] = {0, 0}, cnt[2] = {0, 0}; double logerr[2] = {0, 0}, regret[2] = {0, 0};
  for (auto& s : shapes) {
    int g = s.tag == "s1" ? 0 : 1;
    double best_meas = 1e300; for (auto& p : s.pts) best_meas = min(best_meas, p.us);
    double best_pred = 1e300; const Pt* pick = nullptr;
    double le = 0;
    for (auto& p : s.pts) {
      double t = simulate(s, p.sb, P, use_ctx);
      le += pow(log(t / p.us), 2);
      if (t < best_pred * 0.999) { best_pred = t; pick = &p; }
    }
    logerr[g] += le / s.pts.size();
    double r = pick->us / best_meas;
    regret[g] += log(r);
    within[g] += r <= 1.05; cnt[g]++;
    if (verbose) printf("%s %2d pick %3d r %.3f\n", s.tag.c_str(), s.idx, pick->s, r);
  }
  printf("s1 %d/%d regret %.4f rms %.3f | s2 %d/%d regret %.4f rms %.3f\n", within[0], cnt[0], regret[0] / cnt[0],
         sqrt(logerr[0] / cnt[0]), within[1], cnt[1], regret[1] / cnt[1], sqrt(logerr[1] / cnt[1]));
}
