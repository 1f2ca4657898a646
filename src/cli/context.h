// What several commands need: the store, registry options, output helpers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "cli/command.h"
#include "image/registry.h"
#include "image/store.h"

namespace berth::cli {

/// Opens the store at --home / $BERTH_HOME / the default location.
Result<Store> open_store(const GlobalOptions& g);
/// Registry options from --insecure-registry, $BERTH_INSECURE_REGISTRIES and
/// the "insecure-registries" list of $BERTH_CONFIG_DIR/config.json.
Result<RegistryOptions> registry_options(const GlobalOptions& g);
/// Prints JSON to stdout, indented, with a trailing newline.
void print_json(const nlohmann::json& j);

}  // namespace berth::cli
