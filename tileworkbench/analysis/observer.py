"""What rides along the barrier simulation: :class:`BarrierObserver`, the interface the protocol
checker implements. The simulation calls these methods, and only these, with the threads that
execute each operation; an observer adds findings (``sim.finding``) but never events, so the
timeline is the same with or without one.

Every protocol method gets ``name`` and ``slot`` (the barrier slot), ``frame`` (where the
simulation is: ``protocol.Frame``), ``event`` (the timeline event just recorded) and ``state``
(the slot's ``protocol.SlotState`` before the operation changes it); ``who`` is the boolean
mask of the threads that execute it.
"""

from __future__ import annotations


class BarrierObserver:
    """No-op defaults: an observer overrides what it needs."""

    def interesting(self, stmt) -> bool:
        """Whether the simulation should show it ``stmt``, a statement outside the protocol (one
        that touches shared memory, say), through :meth:`scan`."""
        return False

    def scan(self, stmt, active, frame):
        """``stmt`` (one :meth:`interesting` chose, or a declaration that reads one) runs for the
        ``active`` threads."""

    def on_init(self, name, slot, frame, event, state):
        """The slot is initialised (``state.count`` arrivals a phase)."""

    def on_expect(self, name, slot, who, frame, event, state, nbytes):
        """``who`` announce ``nbytes`` transaction bytes in all on the current phase."""

    def on_tma_load(self, name, slot, who, frame, event, state, stmt, call, nbytes):
        """``who`` issue the TMA load ``call`` (``nbytes`` a thread, None where unknown) that
        completes on the slot."""

    def on_arrive(self, name, slot, who, frame, event, state):
        """``who`` arrive on the current phase."""

    def on_wait(self, name, slot, who, frame, event, state):
        """``who`` wait; ``event["completes"]`` says whether the phase they wait for is done."""

    def finish(self):
        """The simulation is over (also after it stopped early)."""
