from django.urls import path

from config.api import api

urlpatterns = [
    path("api/sdk/v1/", api.urls),
]
