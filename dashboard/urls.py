from django.contrib.auth import views as auth_views
from django.urls import path

from dashboard import views
from dashboard.access import public_page

urlpatterns = [
    path("", views.home, name="dashboard-home"),
    path("settings/invitations/", views.invitations, name="dashboard-invitations"),
    path(
        "accounts/login/",
        public_page(auth_views.LoginView.as_view(template_name="dashboard/login.html")),
        name="dashboard-login",
    ),
    path("accounts/logout/", public_page(auth_views.LogoutView.as_view()), name="dashboard-logout"),
    path("accounts/signup/", views.signup, name="dashboard-signup"),
    path("settings/keys/", views.keys, name="dashboard-keys"),
    path("settings/keys/<uuid:key_id>/revoke/", views.key_revoke, name="dashboard-key-revoke"),
    path("settings/routing/", views.routing, name="dashboard-routing"),
    path("w/<int:workspace_id>/", views.explorer, name="dashboard-workspace"),
    path("w/<int:workspace_id>/graph/", views.explorer, name="dashboard-explorer"),
    path("w/<int:workspace_id>/graph/data/", views.explorer_data, name="dashboard-explorer-data"),
    path(
        "w/<int:workspace_id>/graph/edges/<int:edge_id>/", views.explorer_edge, name="dashboard-explorer-edge"
    ),
    path("w/<int:workspace_id>/graph/node/", views.explorer_node, name="dashboard-explorer-node"),
    path("w/<int:workspace_id>/rollout/", views.rollout, name="dashboard-rollout"),
    path("w/<int:workspace_id>/rollout/mode/", views.rollout_mode, name="dashboard-rollout-mode"),
    path("w/<int:workspace_id>/memories/", views.memories, name="dashboard-memories"),
    path("w/<int:workspace_id>/memories/<uuid:memory_id>/", views.memory_detail, name="dashboard-memory"),
    path("w/<int:workspace_id>/entities/", views.entities, name="dashboard-entities"),
    path("w/<int:workspace_id>/entities/<int:node_id>/", views.entity_detail, name="dashboard-entity"),
    path("w/<int:workspace_id>/facts/", views.facts, name="dashboard-facts"),
    path("w/<int:workspace_id>/communities/", views.communities, name="dashboard-communities"),
    path("w/<int:workspace_id>/members/", views.members, name="dashboard-members"),
    path("w/<int:workspace_id>/members/<int:user_id>/role/", views.member_role, name="dashboard-member-role"),
    path(
        "w/<int:workspace_id>/members/<int:user_id>/remove/",
        views.member_remove,
        name="dashboard-member-remove",
    ),
    path(
        "w/<int:workspace_id>/invitations/<int:invitation_id>/cancel/",
        views.invitation_cancel,
        name="dashboard-invitation-cancel",
    ),
]
