// `berth load`: reads an image archive (OCI layout or `docker save`) into the store; the
// formats are described in image/image_archive.h.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "core/error.h"
#include "image/image_archive.h"
#include "image/store.h"

namespace berth {

/// Reads an image archive from `fd` (`what` names it in errors) into `store`; returns the
/// records added, one per name.
Result<std::vector<ImageRecord>> load_archive(Store& store, int fd, const std::string& what);

/// As load_archive(), from the directory `dir` that holds the archive's files (an OCI layout
/// as `skopeo copy ... oci:DIR` writes it, or a `docker save` tree unpacked).
Result<std::vector<ImageRecord>> load_directory(Store& store, const std::string& dir);

/// The reference an index.json entry names from its annotations, "" when none: the
/// containerd name, else a ref.name that is a whole reference ("repo:tag", "host/repo").
std::string name_from_annotations(const nlohmann::json& annotations);

/// The name of an image the archive leaves unnamed: "localhost/<short id>:<tag>", the tag
/// from a bare ref.name annotation, else "latest".
std::string unnamed_image_name(const std::string& config_digest, const std::string& tag);

}  // namespace berth
