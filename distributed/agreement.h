#pragma once
// Note [Ranks that must agree]
// Some things must be the same on every rank before training starts, or the ranks go wrong
// together in ways no collective notices: models with differently named or shaped parameters
// (DDP would add unrelated numbers), a learning rate or seed given to one rank only (the
// replicas drift apart; one may diverge), a batch size or epoch count that gives the ranks
// different numbers of steps (the rank with more waits in a reduction the others never start).
// check_ranks_agree gathers every rank's list of (name, value) settings as text and compares
// each rank's with rank 0's. Every rank compares the same gathered lists, so all throw the same
// Error, naming the first setting that differs and which ranks have which value. The text is
// gathered whole rather than hashed: a hash would say that something differs, not what.
#include <string>
#include <utility>
#include <vector>

#include "distributed/process_group.h"

namespace ember::distributed {

// "rank 1" or "ranks 1, 3", for messages.
std::string rank_list(const std::vector<int>& ranks);

// Every rank's `text` (of any length), rank r's at index r.
std::vector<std::string> allgather_text(ProcessGroup& group, const std::string& text);

using Settings = std::vector<std::pair<std::string, std::string>>;  // (name, value), in order

// Throws on every rank unless every rank passes the same settings. The message starts with
// `context`, names the first setting that differs ("--lr is 0.05 on rank 0 but 0.1 on rank 1")
// and ends with `advice`.
void check_ranks_agree(ProcessGroup& group, const Settings& settings, const std::string& context,
                       const std::string& advice);

}  // namespace ember::distributed
