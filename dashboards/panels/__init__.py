"""Pages of the SLCA-GRPO dashboard; each module renders one tab from `slca.dashboard_data`."""
