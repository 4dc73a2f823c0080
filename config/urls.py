from django.urls import include, path

from config.api import api

urlpatterns = [
    path("api/sdk/v1/", api.urls),
    path("", include("dashboard.urls")),  # the dashboard
    path("", include("ops.urls")),
]
