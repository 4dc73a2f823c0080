"""An entity with no current fact unseen for the retention is archived (kept), not deleted."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graphsvc', '0017_entity_merges_confidence_centroids'),
    ]

    operations = [
        migrations.AddField(
            model_name='graphnode',
            name='archived_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
