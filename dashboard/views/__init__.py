"""Dashboard pages: thin function views by area, over dashboard.selectors and dashboard.graph (reads) and the
tenancy, rollout and pipeline services (writes). Every workspace page declares its role (dashboard.access)
and does its reads inside the workspace's RLS transaction."""
