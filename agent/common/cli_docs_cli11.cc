#include "agent/common/cli_docs_cli11.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fabric::docs {
namespace {

bool Visible(const CLI::Option* o) { return !o->get_group().empty(); }

// Path options of `cmd` and its subcommands, by name.
void AddPathOptions(const CLI::App& cmd, std::vector<std::string>* out) {
  for (const CLI::Option* o : cmd.get_options()) {
    if (!Visible(o) || o->get_lnames().empty() || o->get_expected_min() == 0) continue;
    const std::string name = "--" + o->get_lnames()[0];
    if (TakesPath(name)) out->push_back(name);
  }
  for (const CLI::App* sub : VisibleSubcommands(cmd)) AddPathOptions(*sub, out);
}

}  // namespace

std::string Summary(const CLI::App& app) {
  std::string s = app.get_description();
  s = s.substr(0, s.find('\n'));
  if (const size_t colon = s.find(": "); colon != std::string::npos) s = s.substr(colon + 2);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::vector<Item> OptionItems(const CLI::App& cmd) {
  std::vector<Item> positionals, named;
  for (const CLI::Option* o : cmd.get_options()) {
    if (!Visible(o)) continue;
    if (o->get_positional() && o->get_lnames().empty() && o->get_snames().empty()) {
      positionals.push_back({"", o->get_name(), o->get_description()});
      continue;
    }
    std::vector<std::string> names;
    for (const std::string& s : o->get_snames()) names.push_back("-" + s);
    for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
    Item item{absl::StrJoin(names, ", "), "", o->get_description()};
    if (o->get_expected_max() > 0) {
      // The type alone ("UINT"); the help text says what the validators allow.
      const std::string type = o->get_type_name();
      item.arg = type.empty() ? "VALUE" : type.substr(0, type.find(':'));
      if (!o->get_default_str().empty()) {
        absl::StrAppend(&item.text, " (default: ", o->get_default_str(), ")");
      }
    }
    named.push_back(std::move(item));
  }
  positionals.insert(positionals.end(), named.begin(), named.end());
  return positionals;
}

std::vector<std::string> LongOptionNames(const CLI::App& cmd) {
  std::vector<std::string> out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (Visible(o) && !o->get_lnames().empty()) out.push_back("--" + o->get_lnames()[0]);
  }
  return out;
}

std::vector<const CLI::App*> VisibleSubcommands(const CLI::App& app) {
  std::vector<const CLI::App*> out;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!sub->get_group().empty()) out.push_back(sub);
  }
  return out;
}

Page PageOf(const CLI::App& app, std::string name, int section, std::string synopsis) {
  Page p;
  p.name = std::move(name);
  p.section = section;
  p.summary = Summary(app);
  p.synopsis = std::move(synopsis);
  const std::vector<const CLI::App*> subs = VisibleSubcommands(app);
  if (subs.empty()) {
    p.sections.push_back({"OPTIONS", {}, OptionItems(app)});
    return p;
  }
  p.sections.push_back({"COMMANDS", {}, {}});
  for (const CLI::App* sub : subs) {
    p.sections.push_back({sub->get_name(), {sub->get_description()}, OptionItems(*sub), true});
  }
  return p;
}

Completion CompletionOf(const CLI::App& app, std::string program,
                        std::vector<std::string> extra_words) {
  Completion c;
  c.program = std::move(program);
  for (const CLI::App* sub : VisibleSubcommands(app)) {
    c.words.push_back(sub->get_name());
    c.subcommands.emplace_back(sub->get_name(), LongOptionNames(*sub));
  }
  for (std::string& w : extra_words) c.words.push_back(std::move(w));
  for (std::string& o : LongOptionNames(app)) c.words.push_back(std::move(o));
  AddPathOptions(app, &c.path_options);
  return c;
}

}  // namespace fabric::docs
