// Relayed transport cases of the fabric suite (fake, TCP, verbs): every side's Domain is wrapped so
// that its Workers connect to every peer through a relay host of their own (a
// second Domain of the same transport, running a relay::Forwarder), so the whole
// suite body runs source -> relay -> target over that transport. The relay is
// progressed from the side's Worker::Progress (one thread, no extra threads).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "proxy/fabric/relay/relay_options.h"
#include "tests/fabric_api/fabric_harness.h"

namespace railyard::fabric::testing {

/// A case named `name` whose sides relay every Endpoint through a relay host made
/// with `make` (the transport underneath; its knobs apply to both), with relay
/// `options` (timeoutMs is taken from the knobs).
TransportCase RelayedCase(std::string name,
                          std::function<Status(const Knobs&, std::unique_ptr<Domain>*)> make,
                          relay::RelayOptions options);

}  // namespace railyard::fabric::testing
