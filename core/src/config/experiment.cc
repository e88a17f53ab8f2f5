#include "absl/strings/string_view.h"
#include "config/experiment.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "config/schema.h"
#include "testbed/component.h"

namespace testbed {

const std::vector<std::string>& CoreSectionNames() {
  static const std::vector<std::string> names = {"experiment", "cluster", "model", "train",    "parallel",
                                                 "sweep",      "arm",     "point", "reference"};
  return names;
}

std::uint64_t StableHash(absl::string_view text, std::uint64_t seed) noexcept {
  std::uint64_t h = 14695981039346656037ull ^ (seed * 1099511628211ull);
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

struct SetOverride {
  KeyPath path;
  ConfigDoc doc;  // holds the value at ["v"], positions named "--set <text>"
  std::string arm;  // "arm.<name>.<key>=...": applies to that arm's runs only
};

absl::StatusOr<SetOverride> ParseSet(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return absl::InvalidArgumentError(absl::StrCat("--set '", text, "': expected key=value"));
  }
  auto path = ParsePath(text.substr(0, eq));
  if (!path.ok()) return absl::InvalidArgumentError(absl::StrCat("--set '", text, "': ", path.status().message()));
  const std::string value = text.substr(eq + 1);
  if (value.find_first_of("\n\r") != std::string::npos) {
    // TOML would end the value at the line break and drop the rest.
    return absl::InvalidArgumentError(absl::StrCat("--set '", text.substr(0, eq), "=...': the value holds a line break; ",
                                                   "give it on one line"));
  }
  const std::string source = absl::StrCat("--set ", text);
  // A TOML value, or else the text as a string (so --set model.preset=gpt-2.5b works).
  auto doc = ConfigDoc::ParseString(absl::StrCat("v = ", value), source);
  if (!doc.ok() || doc->Get({"v"}) == nullptr) {
    std::string escaped = absl::StrReplaceAll(value, {{"\\", "\\\\"}, {"\"", "\\\""}});
    doc = ConfigDoc::ParseString(absl::StrCat("v = \"", escaped, "\""), source);
    if (!doc.ok()) return absl::InvalidArgumentError(absl::StrCat("--set '", text, "': cannot read the value"));
  }
  doc->ForgetLinePositions();
  return SetOverride{std::move(*path), std::move(*doc)};
}

std::string ValueText(const toml::node& n) {
  if (auto s = n.value_exact<std::string>()) return *s;
  std::ostringstream out;
  n.visit([&](auto&& v) {
    if constexpr (toml::is_value<decltype(v)>) {
      out << v;
    } else {
      out << toml::toml_formatter(v);
    }
  });
  return out.str();
}

// A setting an arm or a named point applies to its runs: `target` in the run's document
// takes the value at `source` in the experiment file.
struct Override {
  KeyPath target;
  KeyPath source;
};

// The keys of an [[arm]] or [[point]] table at `path` (besides name and doc): component kinds,
// dotted keys ("train.micro_batch" = 8), or section tables merged key by key.
std::vector<Override> ParseOverrides(const ConfigDoc& doc, const toml::table& t, const KeyPath& path,
                                     const std::string& owner, ErrorList& errors) {
  std::vector<Override> overrides;
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    KeyPath src = path;
    src.push_back(key);
    if (key == "doc" && !v.is_string()) {
      const char* got = v.is_table() ? "a table" : v.is_array() ? "an array" : v.is_boolean() ? "a boolean" : "a number";
      errors.Add(doc.Where(src), absl::StrCat(owner, ": 'doc' must be a string, got ", got));
      continue;
    }
    if (key == "name" || key == "doc") continue;
    if (KindFromName(key)) {
      overrides.push_back({{key}, src});
    } else if (key.find('.') != std::string::npos) {
      auto target = ParsePath(key);
      if (!target.ok()) {
        errors.Add(doc.Where(src), absl::StrCat(owner, ": ", target.status().message()));
        continue;
      }
      const std::string& head = target->front();
      if (head == "sweep" || head == "arm" || head == "point" || head == "reference") {
        errors.Add(doc.Where(src), absl::StrCat(owner, ": '", key, "' cannot be set here: [", head,
                                                "] belongs to the experiment file, not to one arm or point"));
      } else if (head == "experiment" && !(target->size() == 2 && (*target)[1] == "seed")) {
        errors.Add(doc.Where(src), absl::StrCat(owner, ": '", key, "' cannot be set here: [experiment] is the same ",
                                                "for every run (only experiment.seed may differ)"));
      } else {
        overrides.push_back({*target, src});
      }
    } else if (v.is_table() && key != "sweep" && key != "arm" && key != "point" && key != "reference") {
      for (auto&& [sk, sv] : *v.as_table()) {
        KeyPath s2 = src;
        s2.emplace_back(sk.str());
        overrides.push_back({{key, std::string(sk.str())}, s2});
      }
    } else {
      errors.Add(doc.Where(src),
                 absl::StrCat(owner, ": unknown key '", key,
                              "'; it takes name, doc, component kinds (partitioner, scheduler, ...), "
                              "section tables (train = { ... }) or dotted keys (\"train.micro_batch\" = 8)"));
    }
  }
  return overrides;
}

bool ValidArmName(const std::string& name) {
  return !name.empty() && name.find_first_of("/@,\"") == std::string::npos && name != "." && name != "..";
}

}  // namespace

absl::StatusOr<Experiment> Experiment::Load(const std::filesystem::path& file, const std::vector<std::string>& sets) {
  Experiment ex;
  ex.file_ = file.string();
  ex.sets_ = sets;
  auto parsed = ConfigDoc::ParseFile(file);
  if (!parsed.ok()) return parsed.status();
  ex.doc_ = std::move(*parsed);
  {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    ex.source_text_ = text.str();
  }
  ErrorList errors;
  const ConfigDoc& doc = ex.doc_;

  // --set: structural keys (experiment, sweep, arm, reference) edit the file; the others
  // are applied to every run last.
  std::vector<SetOverride> run_sets;
  for (const std::string& s : sets) {
    auto o = ParseSet(s);
    if (!o.ok()) return o.status();
    const std::string& head = o->path.front();
    if (head == "arm" && o->path.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat("--set ", s, ": an arm's key is set as arm.<name>.<key>=<value>",
                                                     " (for example arm.merak.scheduler=1f1b)"));
    }
    if (head == "point") {
      return absl::InvalidArgumentError(absl::StrCat("--set ", s, ": points are [[point]] tables of the file; run ",
                                                     "chosen ones with --point NAME, or set a key for every run"));
    }
    if (head == "arm" && o->path.size() >= 3) {
      const toml::array* arms = doc.Get({"arm"}) ? doc.Get({"arm"})->as_array() : nullptr;
      int found = -1;
      for (size_t i = 0; arms && i < arms->size(); ++i) {
        const toml::table* t = arms->get(i)->as_table();
        if (t && t->get("name") && t->get("name")->value_exact<std::string>() == o->path[1]) found = static_cast<int>(i);
      }
      if (found < 0) return absl::InvalidArgumentError(absl::StrCat("--set ", s, ": no arm named '", o->path[1], "'"));
      // Rewrite the array element in place: copy it out, set, put back.
      KeyPath elem = {"arm", absl::StrCat("[", found, "]")};
      toml::table arm_copy = *arms->get(static_cast<size_t>(found))->as_table();
      ConfigDoc arm_doc;
      (void)arm_doc.Set({"a"}, arm_copy, doc, elem);
      KeyPath sub = {"a"};
      sub.insert(sub.end(), o->path.begin() + 2, o->path.end());
      if (auto st = arm_doc.Set(sub, *o->doc.Get({"v"}), o->doc, {"v"}); !st.ok()) return st;
      toml::array* mutable_arms = const_cast<toml::array*>(arms);
      mutable_arms->replace(mutable_arms->begin() + found, *arm_doc.GetTable({"a"}));
      // The array element above has lost its positions; applying the value to the arm's
      // runs again keeps "--set ..." as the place errors about it point to.
      // (An arm's name and doc are not run settings, and a section table given whole is
      // merged key by key by the arm, which a run-level set would not do: those stay as is.)
      const bool section_table = o->path.size() == 3 && o->doc.Get({"v"})->is_table() && !KindFromName(o->path[2]);
      if (!(o->path.size() == 3 && (o->path[2] == "name" || o->path[2] == "doc")) && !section_table) {
        SetOverride per_arm{{}, std::move(o->doc), o->path[1]};
        for (size_t i = 2; i < o->path.size(); ++i) {
          auto seg = o->path[i].find('.') == std::string::npos ? absl::StatusOr<KeyPath>(KeyPath{o->path[i]})
                                                               : ParsePath(o->path[i]);
          if (!seg.ok()) return absl::InvalidArgumentError(absl::StrCat("--set ", s, ": ", seg.status().message()));
          per_arm.path.insert(per_arm.path.end(), seg->begin(), seg->end());
        }
        run_sets.push_back(std::move(per_arm));
      }
      continue;
    }
    if (head == "experiment" || head == "sweep" || head == "reference") {
      if (auto st = ex.doc_.Set(o->path, *o->doc.Get({"v"}), o->doc, {"v"}); !st.ok()) return st;
      continue;
    }
    // A section given whole ("train={ steps = 5 }") is merged key by key, as an arm's is.
    const toml::node* value = o->doc.Get({"v"});
    if (o->path.size() == 1 && value->is_table() && !KindFromName(head)) {
      for (auto&& [k, sub] : *value->as_table()) {
        const std::string key(k.str());
        SetOverride part{o->path, ConfigDoc{}, o->arm};
        part.path.push_back(key);
        if (auto st = part.doc.Set({"v"}, sub, o->doc, {"v", key}); !st.ok()) return st;
        run_sets.push_back(std::move(part));
      }
      continue;
    }
    run_sets.push_back(std::move(*o));
  }

  // Root keys: core sections, component kinds, or backend sections (checked later, when the
  // backend is known).
  // Sweep: each key is a path; values an array. Dimensions keep their order in the file.
  struct Dim {
    KeyPath target;
    std::string key;
    KeyPath source;
    int line;
    size_t size;
  };
  std::vector<Dim> dims;
  if (const toml::node* sw = doc.Get({"sweep"})) {
    const toml::table* t = sw->as_table();
    if (t == nullptr) {
      errors.Add(doc.Where({"sweep"}), "[sweep]: expected a table of key = [values]");
    } else {
      for (auto&& [k, v] : *t) {
        KeyPath src = {"sweep", std::string(k.str())};
        auto target = ParsePath(std::string(k.str()));
        const toml::array* arr = v.as_array();
        if (!target.ok()) {
          errors.Add(doc.Where(src), absl::StrCat("[sweep]: ", target.status().message()));
        } else if (arr == nullptr || arr->empty()) {
          errors.Add(doc.Where(src), absl::StrCat("[sweep] '", std::string(k.str()), "': expected a non-empty array of values"));
        } else if (std::any_of(run_sets.begin(), run_sets.end(), [&](const SetOverride& o) { return o.arm.empty() && o.path == *target; })) {
          // Pinned by --set.
        } else {
          dims.push_back(Dim{*target, std::string(k.str()), src, doc.Where(src).line, arr->size()});
        }
      }
    }
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.line < b.line; });
  for (const Dim& d : dims) ex.sweep_keys_.push_back(d.key);

  // Arms.
  std::vector<std::vector<Override>> arm_overrides;
  const toml::node* arm_node = doc.Get({"arm"});
  const toml::array* arms = arm_node ? arm_node->as_array() : nullptr;
  if (arms == nullptr || arms->empty()) {
    errors.Add(doc.Where({"arm"}), "no [[arm]]: an experiment needs at least one arm (the first is the baseline)");
  } else {
    std::set<std::string> names;
    for (size_t i = 0; i < arms->size(); ++i) {
      KeyPath ap = {"arm", absl::StrCat("[", i, "]")};
      const toml::table* t = arms->get(i)->as_table();
      if (t == nullptr) {
        errors.Add(doc.Where(ap), "[[arm]]: expected a table");
        continue;
      }
      ArmSpec arm;
      arm.index = static_cast<int>(i);
      const toml::node* name = t->get("name");
      if (name == nullptr || !name->is_string() || !ValidArmName(name->as_string()->get())) {
        errors.Add(doc.Where(ap), "[[arm]]: needs name = \"...\" (no '/', '@', ',' or quotes)");
        continue;
      }
      arm.name = name->as_string()->get();
      if (!names.insert(arm.name).second) {
        errors.Add(doc.Where(ap), absl::StrCat("[[arm]]: name '", arm.name, "' is used twice"));
        continue;
      }
      if (const toml::node* d = t->get("doc")) arm.doc = d->value_exact<std::string>().value_or("");
      std::vector<Override> overrides = ParseOverrides(doc, *t, ap, absl::StrCat("[[arm]] '", arm.name, "'"), errors);
      ex.arms_.push_back(std::move(arm));
      arm_overrides.push_back(std::move(overrides));
    }
  }
  // An arm's setting applies after the sweep's: one that replaces a whole component or table
  // holding a swept key would silently undo the sweep in every run of the arm.
  for (size_t ai = 0; ai < arm_overrides.size(); ++ai) {
    for (const Override& o : arm_overrides[ai]) {
      for (const Dim& d : dims) {
        if (o.target.size() >= d.target.size() || !std::equal(o.target.begin(), o.target.end(), d.target.begin())) continue;
        const std::string path = absl::StrJoin(o.target, ".");
        errors.Add(doc.Where(o.source),
                   absl::StrCat("[[arm]] '", ex.arms_[ai].name, "' sets ", path, ", which would replace the [sweep] value of '",
                                d.key, "' in each of its runs; set only what the arm changes, e.g. \"", path,
                                ".use\" = \"...\" for a component"));
      }
    }
  }
  // Named points ([[point]]): each a set of coupled settings (a paper's model with its
  // cluster size and degrees), crossed with the sweep.
  struct NamedPoint {
    std::string name;
    std::vector<Override> overrides;
  };
  std::vector<NamedPoint> named = {{"", {}}};
  if (const toml::node* pn = doc.Get({"point"})) {
    const toml::array* pts = pn->as_array();
    if (pts == nullptr || pts->empty()) {
      errors.Add(doc.Where({"point"}), "[[point]]: expected one or more tables with a name");
    } else {
      named.clear();
      std::set<std::string> names;
      for (size_t i = 0; i < pts->size(); ++i) {
        KeyPath pp = {"point", absl::StrCat("[", i, "]")};
        const toml::table* t = pts->get(i)->as_table();
        const toml::node* name = t ? t->get("name") : nullptr;
        if (name == nullptr || !name->is_string() || !ValidArmName(name->as_string()->get())) {
          errors.Add(doc.Where(pp), "[[point]]: needs name = \"...\" (no '/', '@', ',' or quotes)");
          continue;
        }
        NamedPoint np{name->as_string()->get(), {}};
        if (!names.insert(np.name).second) {
          errors.Add(doc.Where(pp), absl::StrCat("[[point]]: name '", np.name, "' is used twice"));
          continue;
        }
        np.overrides = ParseOverrides(doc, *t, pp, absl::StrCat("[[point]] '", np.name, "'"), errors);
        named.push_back(std::move(np));
      }
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  if (!named.front().name.empty()) ex.sweep_keys_.insert(ex.sweep_keys_.begin(), "point");

  // Points: the named points, each crossed with the cartesian product of the sweep
  // dimensions, first dimension outermost.
  std::vector<std::vector<size_t>> points = {{}};
  for (const Dim& d : dims) {
    std::vector<std::vector<size_t>> next;
    for (const auto& p : points) {
      for (size_t i = 0; i < d.size; ++i) {
        auto q = p;
        q.push_back(i);
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }

  // The base of every run: the file without its structural sections.
  ConfigDoc base = doc;
  for (const char* k : {"sweep", "arm", "point", "reference"}) base.Erase({k});

  std::set<std::string> ids;
  for (size_t ni = 0; ni < named.size(); ++ni)
  for (size_t pi = 0; pi < points.size(); ++pi) {
    const NamedPoint& np = named[ni];
    std::vector<std::pair<std::string, std::string>> values;
    std::vector<std::string> texts;
    if (!np.name.empty()) {
      values.emplace_back("point", np.name);
      texts.push_back(np.name);
    }
    for (size_t di = 0; di < dims.size(); ++di) {
      KeyPath src = dims[di].source;
      src.push_back(absl::StrCat("[", points[pi][di], "]"));
      const std::string text = ValueText(*doc.Get({"sweep", dims[di].key})->as_array()->get(points[pi][di]));
      values.emplace_back(dims[di].key, text);
      texts.push_back(text);
    }
    const std::string point = absl::StrJoin(texts, ",");
    ex.points_.push_back(point);
    for (size_t ai = 0; ai < ex.arms_.size(); ++ai) {
      RunSpec run;
      run.index = static_cast<int>(ex.runs_.size());
      run.arm = ex.arms_[ai].name;
      run.arm_index = static_cast<int>(ai);
      run.point = point;
      run.point_index = static_cast<int>(ni * points.size() + pi);
      run.point_values = values;
      run.id = absl::StrReplaceAll(point.empty() ? run.arm : absl::StrCat(run.arm, "@", point), {{"/", "_"}});
      if (!ids.insert(run.id).second) {
        return absl::InvalidArgumentError(absl::StrCat(ex.file_, ": two runs would both be named '", run.id,
                                                       "'; make the sweep values distinct"));
      }
      run.doc = base;
      for (const Override& o : np.overrides) {
        if (auto st = run.doc.Set(o.target, *doc.Get(o.source), doc, o.source); !st.ok()) {
          errors.Add(doc.Where(o.source), absl::StrCat("[[point]] '", np.name, "': ", st.message()));
        }
      }
      for (size_t di = 0; di < dims.size(); ++di) {
        const toml::array* arr = doc.Get({"sweep", dims[di].key})->as_array();
        KeyPath src = dims[di].source;
        src.push_back(absl::StrCat("[", points[pi][di], "]"));
        if (auto st = run.doc.Set(dims[di].target, *arr->get(points[pi][di]), doc, src); !st.ok()) {
          errors.Add(doc.Where(src), absl::StrCat("[sweep] '", dims[di].key, "': ", st.message()));
        }
      }
      for (const Override& o : arm_overrides[ai]) {
        if (auto st = run.doc.Set(o.target, *doc.Get(o.source), doc, o.source); !st.ok()) {
          errors.Add(doc.Where(o.source), absl::StrCat("[[arm]] '", run.arm, "': ", st.message()));
        }
      }
      for (const SetOverride& o : run_sets) {
        if (!o.arm.empty() && o.arm != run.arm) continue;
        if (auto st = run.doc.Set(o.path, *o.doc.Get({"v"}), o.doc, {"v"}); !st.ok()) {
          errors.Add(o.doc.Where({"v"}), std::string(st.message()));
        }
      }
      ex.runs_.push_back(std::move(run));
      if (!errors.empty()) return errors.ToStatus();
    }
  }

  // References: "arm" or "arm/point" -> the paper's figure.
  if (const toml::node* ref = doc.Get({"reference"})) {
    const toml::table* t = ref->as_table();
    if (t == nullptr) {
      errors.Add(doc.Where({"reference"}), "[reference]: expected a table of \"arm/point\" = number");
    } else {
      for (auto&& [k, v] : *t) {
        KeyPath src = {"reference", std::string(k.str())};
        const std::string key(k.str());
        const size_t slash = key.find('/');
        Reference r;
        r.arm = key.substr(0, slash);
        r.point = slash == std::string::npos ? "" : key.substr(slash + 1);
        r.where = doc.Where(src);
        auto num = v.value<double>();
        if (!num) {
          errors.Add(r.where, absl::StrCat("[reference] '", key, "': expected a number"));
          continue;
        }
        r.value = *num;
        if (std::none_of(ex.arms_.begin(), ex.arms_.end(), [&](const ArmSpec& a) { return a.name == r.arm; })) {
          errors.Add(r.where, absl::StrCat("[reference] '", key, "': no arm named '", r.arm, "'"));
          continue;
        }
        if (!r.point.empty() && std::find(ex.points_.begin(), ex.points_.end(), r.point) == ex.points_.end()) {
          errors.Add(r.where, absl::StrCat("[reference] '", key, "': no sweep point '", r.point, "'; points are: ",
                                           absl::StrJoin(ex.points_, ", ")));
          continue;
        }
        ex.references_.push_back(r);
      }
    }
  }
  if (!errors.empty()) return errors.ToStatus();
  return ex;
}

}  // namespace testbed
