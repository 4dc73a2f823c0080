import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from config.gc_tuning import web_gc_tune  # noqa: E402 - needs the settings the application set up

web_gc_tune()
