// The OpenAPI 3.0 document of berthd's API (docs/api.md summarises it; keep the two together).
#include "gateway/server.h"

#include "gateway/job_state.h"

namespace berth::gateway {
namespace {

using J = nlohmann::ordered_json;

J ref(const char* schema) {
  return {{"$ref", std::string("#/components/schemas/") + schema}};
}

J json_response(const char* description, const char* schema) {
  return {{"description", description},
          {"content", {{"application/json", {{"schema", ref(schema)}}}}}};
}

/// The broker's routes and schemas ([broker], docs/broker.md), added to `doc` one statement at
/// a time: the same text as one more level of the document's initializer makes clang-tidy take
/// half an hour over this file.
template <typename WithErrors>
void broker_paths(nlohmann::ordered_json& doc, const WithErrors& with_errors,
                  const nlohmann::ordered_json& integer, const nlohmann::ordered_json& string,
                  const nlohmann::ordered_json& number) {
  using J = nlohmann::ordered_json;
  const J nullable_string = {{"type", "string"}, {"nullable", true}};
  J job_body = {{"required", true},
                {"content", {{"application/json", {{"schema", ref("BrokerJobRequest")}}}}}};
  job_body["content"]["application/yaml"]["schema"] = {
      {"type", "string"},
      {"description",
       "a TOSCA template of INDIGO's types (tosca.nodes.indigo.Compute, "
       "Container.Application.Docker.Marathon/Chronos, Qcg.Job), read as the job it describes; "
       "in JSON, {\"template\", \"inputs\", \"placement\", \"failover\"} (docs/broker.md)"}};

  J placements_post = {
      {"summary",
       "A broker's dry run ([broker]): every site's verdict on a job, with the reasons of each "
       "rejection and the factors of each score; nothing is submitted"},
      {"requestBody", job_body}};
  placements_post["responses"] = with_errors(
      {{"200", json_response("the chosen site and every verdict", "Placements")},
       {"400", json_response("the body is not a valid job request", "Error")},
       {"422", json_response("no site can take the job: every verdict", "Placements")}});
  doc["paths"]["/v1/placements"]["post"] = std::move(placements_post);

  J manifests_post = {
      {"summary",
       "A broker's manifest ([broker]): what the one site of placement.sites would be sent for "
       "the job (berthd's job body, a Kubernetes Job, a Marathon app, a Chronos job, an "
       "OpenStack server), on the class the broker would choose; nothing is sent"},
      {"requestBody", job_body}};
  manifests_post["responses"] = with_errors(
      {{"200", json_response("the site, its kind, the class and the manifest", "Manifest")},
       {"400", json_response("not a job request, or not one site of the broker in "
                             "placement.sites",
                             "Error")},
       {"422", json_response("no class of the site fits (the placements answer), or its "
                             "backend cannot run the job",
                             "Placements")}});
  doc["paths"]["/v1/manifests"]["post"] = std::move(manifests_post);

  J sites_get = {{"summary", "A broker's sites ([broker]): kind, state, freshness, GPUs by model"}};
  sites_get["responses"] = with_errors({{"200", json_response("the sites", "SiteList")}});
  doc["paths"]["/v1/sites"]["get"] = std::move(sites_get);

  J& schemas = doc["components"]["schemas"];
  schemas["BrokerJobRequest"] = {
      {"type", "object"},
      {"description",
       "a JobRequest whose resources.gpus may be a spec string (\"A100:80GB:2\": vendor, "
       "models, memory per GPU in GiB, count; a count below 1 is a share), with resources.gpu "
       "{vendor, model, memory_mb_min, compute_capability_min, cuda_min, driver_min}, "
       "resources.infiniband, placement {sites, exclude, prefer, strategy} and failover "
       "{max_sites, pending_timeout_s, deadline_s} (docs/broker.md)"},
      {"required", {"image"}}};

  J codes = J::array();
  for (const char* code : {"site_down",
                           "stale_info",
                           "issuer_untrusted",
                           "group_denied",
                           "excluded",
                           "backend_unsupported",
                           "share_unsupported",
                           "no_gpu_model",
                           "gpu_vendor",
                           "gpu_memory",
                           "gpus_per_node",
                           "nodes",
                           "compute_capability",
                           "cuda_too_old",
                           "driver_too_old",
                           "cpus",
                           "memory",
                           "walltime",
                           "no_infiniband",
                           "max_gpus_per_job",
                           "quota"})
    codes.push_back(code);
  J reason = {{"type", "object"}};
  reason["properties"]["code"] = {{"type", "string"}, {"enum", std::move(codes)}};
  reason["properties"]["message"] = string;
  J factors = {{"type", "object"}, {"nullable", true}, {"description", "each from 0 to 100"}};
  for (const char* f : {"start_now", "wait", "free", "fit", "preference", "reliability"})
    factors["properties"][f] = number;
  J candidate = {{"type", "object"}};
  J& c = candidate["properties"];
  c["site"] = string;
  c["partition"] = nullable_string;
  c["class"] = nullable_string;
  c["verdict"] = {{"type", "string"}, {"enum", {"fit", "rejected"}}};
  c["reasons"] = {{"type", "array"}, {"items", std::move(reason)}};
  c["score"] = {{"type", "number"}, {"nullable", true}};
  c["factors"] = std::move(factors);
  J chosen = {{"type", "object"}, {"nullable", true}};
  chosen["properties"] = {
      {"site", string}, {"partition", nullable_string}, {"class", nullable_string}};
  J placements = {{"type", "object"}};
  placements["properties"]["chosen"] = std::move(chosen);
  placements["properties"]["candidates"] = {{"type", "array"}, {"items", std::move(candidate)}};
  schemas["Placements"] = std::move(placements);

  J manifest = {{"type", "object"}};
  manifest["properties"] = {{"site", string},
                            {"kind", string},
                            {"partition", nullable_string},
                            {"class", string},
                            {"manifest", {{"type", "object"}}}};
  schemas["Manifest"] = std::move(manifest);

  J site = {{"type", "object"}};
  J& p = site["properties"];
  p["name"] = string;
  p["kind"] = string;
  p["url"] = nullable_string;
  p["up"] = {{"type", "boolean"}};
  p["fresh"] = {{"type", "boolean"}};
  p["age_s"] = {{"type", "integer"}, {"nullable", true}};
  p["error"] = nullable_string;
  p["gpus"] = {{"type", "object"},
               {"description", "by model: {total, free}"},
               {"additionalProperties", {{"type", "object"}}}};
  p["classes"] = integer;
  J list = {{"type", "object"}};
  list["properties"]["sites"] = {{"type", "array"}, {"items", std::move(site)}};
  schemas["SiteList"] = std::move(list);
}

/// POST /v1/rank, CloudProviderRanker's request and answer (broker/cpr.h), added apart like
/// the broker's other routes, so that the document stays shallow.
template <typename WithErrors>
void rank_paths(nlohmann::ordered_json& doc, const WithErrors& with_connection_errors) {
  using J = nlohmann::ordered_json;
  J rank_post = {
      {"summary",
       "A broker as INDIGO's CloudProviderRanker ([broker]): CPR's request {preferences, sla, "
       "monitoring}, CPR's answer, worst first; open, as CPR is"},
      {"security", J::array()}};
  rank_post["requestBody"] = {
      {"required", true}, {"content", {{"application/json", {{"schema", ref("RankRequest")}}}}}};
  rank_post["responses"] = with_connection_errors(
      {{"200", json_response("every service, ranked or not, in CPR's order", "RankAnswer")},
       {"400", json_response("not a CPR request", "Error")}});
  doc["paths"]["/v1/rank"]["post"] = std::move(rank_post);

  J& schemas = doc["components"]["schemas"];
  J request = {{"type", "object"},
               {"description",
                "CloudProviderRanker's request: preferences [{service_type, priority: [{sla_id, "
                "service_id, weight}]}], sla [{id, provider, services: [{service_id, targets: "
                "[{type, restrictions}]}]}], monitoring [{provider, services: [{service_id, "
                "service_parent_id, type, metrics: [{metricName, metricValue}]}]}]"}};
  for (const char* list : {"preferences", "sla", "monitoring"})
    request["properties"][list] = {{"type", "array"}, {"items", {{"type", "object"}}}};
  schemas["RankRequest"] = std::move(request);
  J service = {{"type", "object"}};
  J& p = service["properties"];
  p["provider"] = {{"type", "string"}};
  p["service_id"] = {{"type", "string"}};
  p["sla_weight"] = {{"type", "number"}, {"nullable", true}};
  p["total_score"] = {{"type", "number"}};
  p["rank"] = {{"type", "integer"}, {"description", "1 is the best; -1 where not ranked"}};
  p["ranked"] = {{"type", "boolean"}};
  schemas["RankAnswer"] = {{"type", "array"}, {"items", std::move(service)}};
}

}  // namespace

nlohmann::ordered_json openapi_document(const std::string& version) {
  // Any request, with a token or without, may meet the connection limits of docs/gateway.md
  // ("Slow and greedy clients"; gateway/connections.h) before it is routed; the connection is
  // closed after either answer.
  J connection_errors = {
      {"408", json_response("the request's headers and body did not arrive within [connections] "
                            "request_timeout_s of its first byte; the connection is closed",
                            "Error")},
      {"503", json_response("refused before the request was read: too many connections from the "
                            "client's address ([connections] max_per_address) or waiting for a "
                            "worker ([connections] max_queued); the connection is closed",
                            "Error")}};
  J errors = {{"401", json_response("no valid bearer token (see WWW-Authenticate)", "Error")},
              {"403", json_response("a valid token whose identity has no local account", "Error")}};
  errors.update(connection_errors);
  auto with_errors = [&](J responses) {
    for (const auto& [status, answer] : errors.items())
      if (!responses.contains(status)) responses[status] = answer;
    return responses;
  };
  auto with_connection_errors = [&](J responses) {
    for (const auto& [status, answer] : connection_errors.items())
      if (!responses.contains(status)) responses[status] = answer;
    return responses;
  };
  J me_responses =
      with_errors({{"200", json_response("the caller's identity and account", "Me")},
                   {"500", json_response("the job database cannot be read", "Error")}});
  me_responses["503"] = json_response(
      "the usage the caller's quota is counted from cannot be read (sacct failing)", "Error");
  J id_param = J::array(
      {{{"name", "id"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}});
  J not_found = J::array({{"404", json_response("no such job, or another user's", "Error")}});
  J integer = {{"type", "integer"}};
  J string = {{"type", "string"}};
  J number = {{"type", "number"}};
  J strings = {{"type", "array"}, {"items", string}};
  J state_names = J::array();  // gateway/job_state.h's table
  for (const JobStateFacts& f : job_states()) state_names.push_back(std::string(f.name));
  J doc = {
      {"openapi", "3.0.3"},
      {"info",
       {{"title", "berthd"},
        {"version", version},
        {"description",
         "Berth's REST job gateway: OIDC bearer tokens, jobs run through Slurm. Fields may be "
         "added to any object; none changes meaning."}}},
      {"paths",
       {{"/v1/health",
         {{"get",
           {{"summary", "Liveness; needs no token"},
            {"security", J::array()},
            {"responses",
             with_connection_errors({{"200", json_response("berthd is serving", "Health")}})}}}}},
        {"/v1/openapi.json",
         {{"get",
           {{"summary", "This document"},
            {"security", J::array()},
            {"responses",
             with_connection_errors({{"200", {{"description", "an OpenAPI 3 document"}}}})}}}}},
        {"/v1/me",
         {{"get",
           {{"summary", "The identity, local account and groups the gateway sees"},
            {"responses", me_responses}}}}},
        {"/v1/jobs",
         {{"get",
           {{"summary", "The caller's jobs (every job for an administrator), newest first"},
            {"parameters", J::array({{{"name", "state"}, {"in", "query"}, {"schema", string}},
                                     {{"name", "since"},
                                      {"in", "query"},
                                      {"description", "Unix time"},
                                      {"schema", integer}}})},
            {"responses", with_errors({{"200", json_response("the jobs", "JobList")}})}}},
          {"post",
           {{"summary", "Submit a job; an Idempotency-Key makes retries safe"},
            {"parameters",
             J::array({{{"name", "Idempotency-Key"}, {"in", "header"}, {"schema", string}},
                       {{"name", "dry_run"},
                        {"in", "query"},
                        {"description",
                         "1: only say whether the job would be taken now (the checks of a "
                         "submission; nothing recorded or sent to Slurm), a 200 with a Fit"},
                        {"schema", {{"type", "string"}, {"enum", {"0", "1"}}}}}})},
            {"requestBody",
             {{"required", true},
              {"content", {{"application/json", {{"schema", ref("JobRequest")}}}}}}},
            {"responses",
             with_errors({{"201", json_response("recorded and sent to Slurm", "Job")},
                          {"200",
                           {{"description",
                             "a retry: the job the key made before; with dry_run=1, whether "
                             "the job would be taken (Fit)"},
                            {"content",
                             {{"application/json",
                               {{"schema", {{"oneOf", J::array({ref("Job"), ref("Fit")})}}}}}}}}},
                          {"400", json_response("the body is not a valid job request, or names "
                                                "a partition the site does not open",
                                                "Error")},
                          {"403", json_response("a valid token with no local account, a job "
                                                "over one of the account's limits (the error "
                                                "names it: limit, value, requested or current), "
                                                "or a GPU job over its group's GPU-hour quota "
                                                "(quota, group, budget_gpu_hours, used_gpu_hours)",
                                                "Error")},
                          {"422", json_response("the key was used for another request", "Error")},
                          {"503", json_response("a GPU job's group quota cannot be checked (sacct "
                                                "failed), or the connection was refused "
                                                "([connections] max_per_address, max_queued)",
                                                "Error")}})}}}}},
        {"/v1/jobs/{id}",
         {{"parameters", id_param},
          {"get",
           {{"summary", "One job"},
            {"responses", with_errors({{"200", json_response("the job", "Job")}, not_found[0]})}}},
          {"delete",
           {{"summary", "Cancel a job"},
            {"responses",
             with_errors({{"202", json_response("cancel sent", "Job")}, not_found[0]})}}}}},
        {"/v1/jobs/{id}/output",
         {{"parameters", id_param},
          {"get",
           {{"summary", "The last lines of a job's stdout and stderr"},
            {"parameters", J::array({{{"name", "tail"},
                                      {"in", "query"},
                                      {"description",
                                       "lines of each stream, 1 to 10000 (default 100); at "
                                       "most 1 MiB of each"},
                                      {"schema", integer}}})},
            {"responses",
             with_errors({{"200", json_response("the output so far", "JobOutput")},
                          {"400", json_response("tail is out of range", "Error")},
                          {"404", json_response("no such job, another user's, or no output "
                                                "kept by this gateway",
                                                "Error")}})}}}}},
        {"/v1/systems",
         {{"get",
           {{"summary", "The clusters this gateway fronts and their state"},
            {"responses", with_errors({{"200", json_response("the systems", "SystemList")}})}}}}},
        {"/v1/resources",
         {{"get",
           {{"summary", "The site as GLUE 2.1 entities (no token where the site allows)"},
            {"responses",
             with_errors({{"200", json_response("the GLUE 2.1 document", "Glue")},
                          {"502", json_response("slurmrestd did not answer", "Error")}})}}}}},
        {"/v1/accounting",
         {{"get",
           {{"summary", "GPU-hours, CPU-hours and jobs per user, group or GPU model"},
            {"parameters",
             J::array({{{"name", "since"},
                        {"in", "query"},
                        {"schema", integer},
                        {"description", "Unix time (default: 30 days ago)"}},
                       {{"name", "until"},
                        {"in", "query"},
                        {"schema", integer},
                        {"description", "Unix time (default: now)"}},
                       {{"name", "group_by"},
                        {"in", "query"},
                        {"schema", {{"type", "string"}, {"enum", {"user", "group", "gpu_model"}}}}},
                       {{"name", "format"},
                        {"in", "query"},
                        {"schema", {{"type", "string"}, {"enum", {"json", "csv"}}}}}})},
            {"responses",
             with_errors({{"200", json_response("the usage (text/csv with format=csv)", "Usage")},
                          {"400", json_response("a bad parameter", "Error")},
                          {"503", json_response("Slurm's accounting cannot be read (sacct "
                                                "failed; [accounting] source = \"sacct\"), or "
                                                "the connection was refused ([connections] "
                                                "max_per_address, max_queued)",
                                                "Error")}})}}}}},
        {"/v1/orphans",
         {{"get",
           {{"summary",
             "GPU processes that belong to no running job, as the running GPU jobs' "
             "samples show them ([reclaim]; administrators)"},
            {"responses", with_errors({{"200", json_response("the orphans", "OrphanList")},
                                       {"403", json_response("not an administrator (or no account)",
                                                             "Error")}})}}}}},
        {"/metrics",
         {{"get",
           {{"summary",
             "Prometheus metrics (text format 0.0.4; administrators, or anyone "
             "where metrics_public)"},
            {"responses",
             with_errors({{"200",
                           {{"description", "the metrics"},
                            {"content", {{"text/plain", {{"schema", string}}}}}}}})}}}}}}},
      {"components",
       {{"securitySchemes",
         {{"bearer", {{"type", "http"}, {"scheme", "bearer"}, {"bearerFormat", "JWT"}}}}},
        {"schemas",
         {{"Health",
           {{"type", "object"},
            {"properties",
             {{"status", {{"type", "string"}, {"enum", {"ok"}}}},
              {"version", {{"type", "string"}}},
              {"issuers",
               {{"type", "array"},
                {"description", "the token issuers the gateway trusts, each with its audience"},
                {"items",
                 {{"type", "object"},
                  {"properties", {{"issuer", string}, {"audience", string}}}}}}},
              {"broker", {{"type", "boolean"}, {"description", "whether [broker] is on"}}},
              {"dry_run",
               {{"type", "boolean"},
                {"description", "whether it answers POST /v1/jobs?dry_run=1 ([slurm])"}}}}}}},
          {"Me",
           {{"type", "object"},
            {"properties",
             {{"issuer", {{"type", "string"}}},
              {"subject", {{"type", "string"}}},
              {"user", {{"type", "string"}, {"description", "the local account jobs run as"}}},
              {"uid", {{"type", "integer"}}},
              {"gid", {{"type", "integer"}}},
              {"groups", {{"type", "array"}, {"items", {{"type", "string"}}}}},
              {"admin", {{"type", "boolean"}}}}}}},
          {"JobRequest",
           {{"type", "object"},
            {"required", {"image"}},
            {"properties",
             {{"name", string},
              {"image", {{"type", "string"}, {"description", "an image reference or .sqsh file"}}},
              {"command", strings},
              {"env", {{"type", "object"}, {"additionalProperties", string}}},
              {"mounts", strings},
              {"workdir", string},
              {"group",
               {{"type", "string"},
                {"description",
                 "the caller's token group (VO) the job is accounted to, for accounting and "
                 "GPU-hour quotas; another group is 403; without it berthd picks one"}}},
              {"class",
               {{"type", "string"},
                {"enum", {"batch", "cloud"}},
                {"description",
                 "cloud: short interactive work, under its own shorter walltime cap "
                 "(cloud_max_walltime_s), cut by berthd at the limit, Slurm's time limit as the "
                 "backstop"}}},
              {"resources",
               {{"type", "object"},
                {"properties",
                 {{"nodes", integer},
                  {"tasks", integer},
                  {"cpus_per_task", integer},
                  {"memory_mb", integer},
                  {"gpus", integer},
                  {"gpu_model",
                   {{"type", "string"},
                    {"pattern", "^[A-Za-z0-9_.-]+$"},
                    {"description",
                     "the GPU model of the gpus: a GRES type of the site (gpu:TYPE:N), one of "
                     "its [gpu_models]; needs gpus"}}},
                  {"gpu_type",
                   {{"type", "string"},
                    {"pattern", "^[A-Za-z0-9_.-]+$"},
                    {"description", "another name of gpu_model; not with it"}}},
                  {"partition",
                   {{"type", "string"},
                    {"pattern", "^[A-Za-z0-9_.-]+$"},
                    {"description",
                     "the Slurm partition to run in: [slurm] partition or one of [slurm] "
                     "partitions; without it, [slurm] partition"}}},
                  {"walltime_s", integer},
                  {"gpu_share",
                   {{"type", "number"},
                    {"exclusiveMinimum", true},
                    {"minimum", 0},
                    {"exclusiveMaximum", true},
                    {"maximum", 1},
                    {"description",
                     "a fraction of one GPU on each node, where the site shares GPUs "
                     "([share]); not with gpus"}}}}}}}}}}},
          {"Job",
           {{"type", "object"},
            {"properties",
             {{"id", string},
              {"name", string},
              {"image", string},
              {"owner", string},
              {"class", {{"type", "string"}, {"enum", {"batch", "cloud"}}}},
              {"walltime_s",
               {{"type", "integer"},
                {"description",
                 "the job's Slurm time limit as berthd set it, in seconds; 0: the partition's"}}},
              {"state",
               {{"type", "string"},
                {"enum", state_names},
                {"description",
                 "ACCEPTED (recorded, not yet in Slurm), SUBMIT_FAILED, or Slurm's job state"}}},
              {"reason",
               {{"type", "string"},
                {"description",
                 "Slurm's reason; for TIMEOUT, the limit that cut the job (\"cut at the cloud "
                 "walltime cap, 3600 s (cloud_max_walltime_s)\")"}}},
              {"exit_code", {{"type", "integer"}, {"nullable", true}}},
              {"slurm_job_id", integer},
              {"nodes", string},
              {"created_at", integer},
              {"updated_at", integer},
              {"start_time", {{"type", "integer"}, {"nullable", true}}},
              {"end_time", {{"type", "integer"}, {"nullable", true}}},
              {"gpus_allocated", integer},
              {"gpu_model",
               {{"type", "string"}, {"description", "the GPU model asked for (only then)"}}},
              {"partition",
               {{"type", "string"}, {"description", "the partition asked for (only then)"}}},
              {"gpu_share",
               {{"type", "number"}, {"description", "the GPU share asked for (only then)"}}},
              {"gres",
               {{"type", "string"},
                {"description", "the GRES per node a GPU share asked Slurm for, e.g. shard:2"}}},
              {"idle_gpus",
               {{"type", "boolean"},
                {"description", "flagged by idle-GPU reclaim (GET and DELETE of one job)"}}},
              {"group",
               {{"type", "string"},
                {"description",
                 "the group (VO) the job is accounted to, chosen when it was accepted (not for "
                 "jobs accepted before berthd kept it)"}}},
              {"gres_detail",
               {{"type", "array"},
                {"items", string},
                {"description",
                 "Slurm's GRES of each allocated node, e.g. gpu:a100:2(IDX:0-1)"}}}}}}},
          {"Fit",
           {{"type", "object"},
            {"required", {"fits", "reason", "message", "start_estimate"}},
            {"properties",
             {{"fits", {{"type", "boolean"}}},
              {"reason",
               {{"type", "string"},
                {"nullable", true},
                {"enum",
                 {"max_gpus_per_job", "walltime", "quota", "no_gpu_model", "share_unsupported",
                  "partition", "limit", nullptr}},
                {"description",
                 "null when the job fits; else the broker's reason code (docs/broker.md); "
                 "limit: another of the account's limits, which the message names"}}},
              {"message",
               {{"type", "string"},
                {"nullable", true},
                {"description", "one line: what refuses the job; null when it fits"}}},
              {"start_estimate",
               {{"type", "integer"},
                {"nullable", true},
                {"description",
                 "when Slurm would start the job (Unix time, sbatch --test-only); null "
                 "without [slurm] start_estimate, for a job that does not fit, or where "
                 "Slurm could not tell"}}}}}}},
          {"JobOutput",
           {{"type", "object"},
            {"properties",
             {{"id", string},
              {"state", string},
              {"tail", integer},
              {"stdout", string},
              {"stdout_truncated", {{"type", "boolean"}}},
              {"stderr", string},
              {"stderr_truncated", {{"type", "boolean"}}}}}}},
          {"System",
           {{"type", "object"},
            {"properties",
             {{"name", string},
              {"kind", {{"type", "string"}, {"enum", {"slurm"}}}},
              {"slurm_api",
               {{"type", "string"},
                {"nullable", true},
                {"description", "the slurmrestd API version spoken; null until chosen"}}},
              {"state", {{"type", "string"}, {"enum", {"up", "degraded", "down"}}}},
              {"reason", string},
              {"nodes",
               {{"type", "object"},
                {"properties",
                 {{"total", integer},
                  {"idle", integer},
                  {"mixed", integer},
                  {"allocated", integer},
                  {"unavailable", integer}}}}},
              {"cpus",
               {{"type", "object"}, {"properties", {{"total", integer}, {"allocated", integer}}}}},
              {"gpus",
               {{"type", "object"}, {"properties", {{"total", integer}, {"allocated", integer}}}}},
              {"partitions",
               {{"type", "array"},
                {"items",
                 {{"type", "object"},
                  {"properties",
                   {{"name", string},
                    {"state", string},
                    {"default", {{"type", "boolean"}, {"nullable", true}}},
                    {"nodes", integer},
                    {"cpus", integer},
                    {"gpus", integer}}}}}}}}}}},
          {"Glue",
           {{"type", "object"},
            {"description",
             "GLUE 2.1 entities by name, each a list of objects with ID, Name, "
             "CreationTime, Validity, the entity's attributes and "
             "Associations (docs/api.md)"},
            {"properties",
             {{"ComputingService", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"ComputingManager", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"ComputingManagerAccelerator", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"ComputingShare", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"ComputingShareAccelerator", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"ExecutionEnvironment", {{"type", "array"}, {"items", {{"type", "object"}}}}},
              {"AcceleratorEnvironment", {{"type", "array"}, {"items", {{"type", "object"}}}}}}}}},
          {"Usage",
           {{"type", "object"},
            {"properties",
             {{"group_by", string},
              {"since", integer},
              {"until", integer},
              {"source", {{"type", "string"}, {"enum", {"database"}}}},
              {"rows",
               {{"type", "array"},
                {"items",
                 {{"type", "object"},
                  {"properties",
                   {{"user", string},
                    {"group", string},
                    {"gpu_model", string},
                    {"gpu_hours", {{"type", "number"}}},
                    {"cpu_hours", {{"type", "number"}}},
                    {"jobs", integer}}}}}}}}}}},
          {"OrphanList",
           {{"type", "object"},
            {"properties",
             {{"watching", {{"type", "boolean"}, {"description", "whether [reclaim] is on"}}},
              {"orphans",
               {{"type", "array"},
                {"items",
                 {{"type", "object"},
                  {"properties",
                   {{"node", string},
                    {"gpu_index", integer},
                    {"gpu_uuid", string},
                    {"pid", integer},
                    {"uid", {{"type", "integer"}, {"nullable", true}}},
                    {"user", {{"type", "string"}, {"nullable", true}}},
                    {"command", {{"type", "string"}, {"nullable", true}}},
                    {"slurm_job_id", {{"type", "integer"}, {"nullable", true}}},
                    {"slurm_job_from",
                     {{"type", "string"},
                      {"nullable", true},
                      {"description", "cgroup, slurmstepd or environ"}}},
                    {"reason", string},
                    {"first_seen", integer},
                    {"last_seen", integer},
                    {"seen_by",
                     {{"type", "object"},
                      {"properties", {{"id", string}, {"slurm_job_id", integer}}}}}}}}}}}}}}},
          {"SystemList",
           {{"type", "object"},
            {"properties", {{"systems", {{"type", "array"}, {"items", ref("System")}}}}}}},
          {"JobList",
           {{"type", "object"},
            {"properties", {{"jobs", {{"type", "array"}, {"items", ref("Job")}}}}}}},
          {"Error",
           {{"type", "object"},
            {"properties",
             {{"error",
               {{"type", "object"},
                {"properties",
                 {{"status", {{"type", "integer"}}},
                  {"message", {{"type", "string"}}},
                  {"limit",
                   {{"type", "string"},
                    {"description",
                     "a 403 over a limit: its name (max_walltime_s, "
                     "max_gpus_per_job, max_running_jobs, max_queued_jobs, "
                     "cloud_max_walltime_s)"}}},
                  {"value", {{"type", "integer"}, {"description", "the limit's value"}}},
                  {"requested",
                   {{"type", "integer"},
                    {"description", "what the job asked for (walltime in s, GPUs)"}}},
                  {"current",
                   {{"type", "integer"}, {"description", "the account's running or queued jobs"}}},
                  {"quota",
                   {{"type", "string"},
                    {"description",
                     "a GPU job over its group's GPU-hour quota: the quota's "
                     "key ([quotas.groups.\"GROUP\"] gpu_hours)"}}},
                  {"group", {{"type", "string"}, {"description", "the group over its quota"}}},
                  {"budget_gpu_hours",
                   {{"type", "number"}, {"description", "its GPU-hours per period"}}},
                  {"used_gpu_hours",
                   {{"type", "number"}, {"description", "its GPU-hours used in this period"}}},
                  {"period",
                   {{"type", "string"}, {"description", "month, week, day or \"N s period\""}}},
                  {"since",
                   {{"type", "integer"},
                    {"description", "the period's start, Unix time"}}}}}}}}}}}}}}},
      {"security", J::array({{{"bearer", J::array()}}})},
  };
  broker_paths(doc, with_errors, integer, string, number);
  rank_paths(doc, with_connection_errors);
  // Where berthd takes jobs, GET /v1/me says the caller's limits and quota (what a broker
  // reads before it sends them a job): added apart, so that the document stays shallow.
  J& me = doc["components"]["schemas"]["Me"]["properties"];
  me["limits"] = {
      {"type", "object"},
      {"description", "the limits in force for the caller, by [limits] key: {\"value\", \"from\"}"},
      {"additionalProperties",
       {{"type", "object"}, {"properties", {{"value", integer}, {"from", string}}}}}};
  J quota = {{"type", "object"}, {"nullable", true}};
  quota["description"] = "the GPU-hour quota of the group the caller's jobs count against";
  for (const char* k : {"gpu_hours", "used_gpu_hours", "left_gpu_hours"})
    quota["properties"][k] = number;
  quota["properties"]["group"] = string;
  quota["properties"]["period"] = string;
  quota["properties"]["since"] = integer;
  me["quota"] = std::move(quota);
  return doc;
}

}  // namespace berth::gateway
