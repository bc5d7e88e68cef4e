"""rnnviz: see how gradients flow backwards through recurrent networks.

The public surface::

    from rnnviz import RunConfig, analyze
    a = analyze(RunConfig(cell="lstm", seq_len=100))
    a.grad_norms            # [T+1] ‖∂L/∂carry_t‖

The core never imports streamlit or plotly (see ``rnnviz.charts`` for figures).
"""

from rnnviz.analysis import Analysis, analyze
from rnnviz.config import FIELD_SPECS, ConfigError, RunConfig

__all__ = ["Analysis", "ConfigError", "FIELD_SPECS", "RunConfig", "analyze"]
__version__ = "0.1.0"
