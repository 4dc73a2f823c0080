from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies = []

    operations = [
        migrations.CreateModel(
            name="WorkerHeartbeat",
            fields=[
                ("worker", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("cluster", models.CharField(max_length=100)),
                ("started_at", models.DateTimeField()),
                ("seen_at", models.DateTimeField()),
            ],
            options={"db_table": "ops_worker_heartbeats"},
        ),
        migrations.CreateModel(
            name="MetricCounter",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100)),
                ("labels", models.JSONField(default=dict)),
                ("value", models.FloatField(default=0.0)),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={"db_table": "ops_metric_counters"},
        ),
        migrations.AddConstraint(
            model_name="metriccounter",
            constraint=models.UniqueConstraint(fields=("name", "labels"), name="ops_metric_counters_unique"),
        ),
    ]
