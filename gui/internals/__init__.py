"""Store-internals views: segment fill, ConsumeQueue units, index slot occupancy and
collision chains, drawn from engine.analysis. `heatmap` and `colors` are Qt-free; the rest are
PySide6 + pyqtgraph."""
from __future__ import annotations

__all__ = ["InternalsPanel", "SegmentFillView", "CqUnitsView", "SlotHeatmapView", "CollisionChainView"]


def __getattr__(name: str):
    # widgets are imported on first use so that `gui.internals.heatmap` stays Qt-free to import
    if name == "InternalsPanel":
        from .panel import InternalsPanel
        return InternalsPanel
    if name == "SegmentFillView":
        from .segment_fill import SegmentFillView
        return SegmentFillView
    if name == "CqUnitsView":
        from .cq_units import CqUnitsView
        return CqUnitsView
    if name == "SlotHeatmapView":
        from .slot_heatmap import SlotHeatmapView
        return SlotHeatmapView
    if name == "CollisionChainView":
        from .collision_chain import CollisionChainView
        return CollisionChainView
    raise AttributeError(name)
