from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard.access import public_page
from dashboard.views import account, changes, explorer, knowledge, members, memories, rollout

W = "w/<int:workspace_id>/"

urlpatterns = [
    path("", account.home, name="dashboard-home"),
    path("settings/invitations/", account.invitations, name="dashboard-invitations"),
    path(
        "accounts/login/",
        public_page(auth_views.LoginView.as_view(template_name="dashboard/login.html")),
        name="dashboard-login",
    ),
    path("accounts/logout/", public_page(auth_views.LogoutView.as_view()), name="dashboard-logout"),
    path("accounts/signup/", account.signup, name="dashboard-signup"),
    path("settings/keys/", account.keys, name="dashboard-keys"),
    path("settings/keys/<uuid:key_id>/revoke/", account.key_revoke, name="dashboard-key-revoke"),
    path("settings/routing/", account.routing, name="dashboard-routing"),
    path(W, explorer.explorer, name="dashboard-workspace"),
    path(W + "graph/", explorer.explorer, name="dashboard-explorer"),
    path(W + "graph/data/", explorer.explorer_data, name="dashboard-explorer-data"),
    path(W + "graph/find/", explorer.explorer_find, name="dashboard-explorer-find"),
    path(W + "graph/edges/<int:edge_id>/", explorer.explorer_edge, name="dashboard-explorer-edge"),
    path(W + "graph/pair/", explorer.explorer_pair, name="dashboard-explorer-pair"),
    path(W + "graph/node/", explorer.explorer_node, name="dashboard-explorer-node"),
    path(W + "graph/path/", explorer.explorer_path, name="dashboard-explorer-path"),
    path(W + "changes/", changes.changes, name="dashboard-changes"),
    path(W + "changes/resolve/", changes.conflict_resolve, name="dashboard-conflict-resolve"),
    path(W + "trace/", changes.trace, name="dashboard-trace"),
    path(W + "rollout/", rollout.rollout, name="dashboard-rollout"),
    path(W + "rollout/mode/", rollout.rollout_mode, name="dashboard-rollout-mode"),
    path(W + "memories/", memories.memories, name="dashboard-memories"),
    path(W + "memories/<uuid:memory_id>/", memories.memory_detail, name="dashboard-memory"),
    path(W + "memories/<uuid:memory_id>/edit/", memories.memory_edit, name="dashboard-memory-edit"),
    path(W + "memories/<uuid:memory_id>/forget/", memories.memory_forget, name="dashboard-memory-forget"),
    path(W + "entities/", knowledge.entities, name="dashboard-entities"),
    path(W + "entities/<int:node_id>/", knowledge.entity_detail, name="dashboard-entity"),
    path(W + "entities/<int:node_id>/merge/", knowledge.entity_merge, name="dashboard-entity-merge"),
    path(
        W + "entities/<int:node_id>/merges/<int:merge_id>/undo/",
        knowledge.entity_merge_undo,
        name="dashboard-entity-merge-undo",
    ),
    path(W + "entities/<int:node_id>/split/", knowledge.entity_split, name="dashboard-entity-split"),
    path(W + "facts/", knowledge.facts, name="dashboard-facts"),
    path(W + "communities/", knowledge.communities, name="dashboard-communities"),
    path(W + "communities/refresh/", knowledge.communities_refresh, name="dashboard-communities-refresh"),
    path(W + "members/", members.members, name="dashboard-members"),
    path(W + "members/<int:user_id>/role/", members.member_role, name="dashboard-member-role"),
    path(W + "members/<int:user_id>/remove/", members.member_remove, name="dashboard-member-remove"),
    path(
        W + "invitations/<int:invitation_id>/cancel/",
        members.invitation_cancel,
        name="dashboard-invitation-cancel",
    ),
]
