// A small subset of Go's text/template over a JSON value, for `--format` as Docker's CLI
// takes it (`inspect --format '{{.State.Status}}'`, `ps --format '{{.ID}} {{.Status}}'`).
//
// What is understood (everything else is a one-line error naming the template):
//   text outside actions, printed as is; `{{-` and `-}}` trim the spaces beside them
//   {{.}} {{.A.B}}              the value, or a field path into it (a missing field is an error)
//   {{"text"}} {{42}}           literals
//   {{json .X}}                 the value as compact JSON
//   {{index .X "key"}} {{index .X 0}}   a map's key or a list's element (a key missing from a
//                               map of strings: "", as Go's map[string]string; else <no value>)
//   {{join .X ","}} {{len .X}} {{upper .X}} {{lower .X}} {{println .X}}
//   {{.X | json}}               a pipe passes the value on as the last argument
//   {{range .X}}...{{end}}      the body once per element of a list (or value of a map), with
//                               {{.}} that element; {{else}} for an empty one
//   {{if .X}}...{{else}}...{{end}}   false, 0, null, "" and empty lists and maps are false
// Values print as Go prints them: strings bare, lists as [a b], maps as map[k:v], null as <nil>.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace berth {

/// Applies `tmpl` to `data`.
Result<std::string> render_template(std::string_view tmpl, const nlohmann::json& data);

}  // namespace berth
