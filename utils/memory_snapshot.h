#pragma once
// A memory snapshot: a device's memory history (Note [Memory history] in core/memory_history.h)
// written as JSON and drawn as an SVG, so that a program that met the memory wall leaves behind
// how memory got there. docs/memory.md, "Reading a memory snapshot", explains both files.
#include <string>

#include "core/device.h"

namespace ember::utils {

struct MemorySnapshotFiles {
  std::string json;  // DIR/memory_snapshot.json
  std::string svg;   // DIR/memory_snapshot.svg
};

// Writes memory::history(device) into `dir`, made if missing, each file atomically (Note [Atomic
// saves]): the events up to the last failed request (the frees after it are the error unwinding
// the stack), or all of them when none failed. The JSON also holds the device, its limit, its
// statistics now and `error_message` (the error the program stops with; "" for none); the SVG
// draws the events with timeline_svg, marks the failed request and the limit, and puts the
// message's first line under the picture. An ember::Error names the path it cannot write.
MemorySnapshotFiles write_memory_snapshot(const std::string& dir, Device device, const std::string& error_message = "");

}  // namespace ember::utils
