from django.urls import include, path

from config.api import api

urlpatterns = [
    path("api/sdk/v1/", api.urls),
    path("", include("dashboard.urls")),  # issue #7: the dashboard
    path("", include("ops.urls")),
]
