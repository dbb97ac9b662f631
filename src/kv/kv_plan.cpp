#include "kv/kv_plan.h"

#include <fstream>
#include <sstream>

#include "util/error.h"

namespace brisk {
namespace {

double parse_number(const std::string& s, const std::string& where, int line, const char* what) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  fail("KV plan {} line {}: {} '{}' is not a number", where, line, what, s);
}

}  // namespace

KvPlan parse_kv_plan(const std::string& text, const std::string& where) {
  KvPlan plan;
  plan.policy.clear();
  int64_t n_layers = -1;
  std::vector<bool> seen;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    const std::string body = raw.substr(0, raw.find('#'));
    std::istringstream ws(body);
    std::vector<std::string> w;
    for (std::string t; ws >> t;) w.push_back(t);
    if (w.empty()) continue;
    if (w[0] == "policy") {
      if (w.size() != 2) fail("KV plan {} line {}: expected 'policy NAME'", where, line);
      if (w[1] != "streaming" && w[1] != "h2o" && w[1] != "snapkv" && w[1] != "tova")
        fail("KV plan {} line {}: unknown policy '{}' (expected streaming, h2o, snapkv or tova)",
             where, line, w[1]);
      plan.policy = w[1];
    } else if (w[0] == "layers") {
      if (w.size() != 2) fail("KV plan {} line {}: expected 'layers N'", where, line);
      if (n_layers >= 0) fail("KV plan {} line {}: 'layers' given twice", where, line);
      const double n = parse_number(w[1], where, line, "layer count");
      if (n < 1 || n > 4096 || n != static_cast<int64_t>(n))
        fail("KV plan {} line {}: layer count {} must be a whole number in [1, 4096]", where,
             line, w[1]);
      n_layers = static_cast<int64_t>(n);
      plan.layers.assign(static_cast<size_t>(n_layers), {});
      seen.assign(static_cast<size_t>(n_layers), false);
    } else if (w[0] == "layer") {
      if (w.size() != 4) fail("KV plan {} line {}: expected 'layer INDEX TYPE KEEP'", where, line);
      if (n_layers < 0) fail("KV plan {} line {}: 'layer' before 'layers N'", where, line);
      const double i = parse_number(w[1], where, line, "layer index");
      if (i < 0 || i >= static_cast<double>(n_layers) || i != static_cast<int64_t>(i))
        fail("KV plan {} line {}: layer index {} out of range [0, {})", where, line, w[1],
             n_layers);
      const size_t l = static_cast<size_t>(i);
      if (seen[l]) fail("KV plan {} line {}: layer {} given twice", where, line, l);
      seen[l] = true;
      KvLayerOption& o = plan.layers[l];
      try {
        o.type = parse_kv_type(w[2]);
      } catch (const Error& e) {
        fail("KV plan {} line {}: {}", where, line, e.what());
      }
      o.keep = parse_number(w[3], where, line, "kept share");
      if (!(o.keep > 0 && o.keep <= 1))
        fail("KV plan {} line {}: kept share {} must be in (0, 1]", where, line, w[3]);
    } else {
      fail("KV plan {} line {}: unknown keyword '{}' (expected policy, layers or layer)", where,
           line, w[0]);
    }
  }
  if (plan.policy.empty()) fail("KV plan {}: no 'policy' line", where);
  if (n_layers < 0) fail("KV plan {}: no 'layers N' line", where);
  for (size_t l = 0; l < seen.size(); ++l)
    if (!seen[l]) fail("KV plan {}: layer {} has no 'layer' line", where, l);
  return plan;
}

KvPlan read_kv_plan(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read KV plan '{}'", path);
  std::stringstream s;
  s << f.rdbuf();
  return parse_kv_plan(s.str(), "'" + path + "'");
}

std::string format_kv_plan(const KvPlan& plan, const std::string& comment) {
  std::string out;
  std::istringstream c(comment);
  for (std::string line; std::getline(c, line);) out += "# " + line + "\n";
  out += fmt::format("policy {}\nlayers {}\n", plan.policy, plan.layers.size());
  for (size_t l = 0; l < plan.layers.size(); ++l)
    out += fmt::format("layer {} {} {}\n", l, kv_type_name(plan.layers[l].type),
                       plan.layers[l].keep);  // {} prints the shortest exact form
  return out;
}

double kv_option_cost(const KvLayerOption& o, int64_t head_dim) {
  return o.keep * static_cast<double>(kv_head_bytes(o.type, head_dim)) /
         static_cast<double>(kv_head_bytes(KvType::f16, head_dim));
}

double kv_plan_cost(const KvPlan& plan, int64_t head_dim) {
  double sum = 0;
  for (const KvLayerOption& o : plan.layers) sum += kv_option_cost(o, head_dim);
  return plan.layers.empty() ? 0 : sum / static_cast<double>(plan.layers.size());
}

}  // namespace brisk
