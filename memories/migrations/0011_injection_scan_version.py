"""The detector version a memory's injection flags come from: stored_rows_repair scans memories of an older
detector again. Existing rows are version 0 (content only)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('memories', '0010_stored_rows_repair'),
    ]

    operations = [
        migrations.AddField(
            model_name='memory',
            name='injection_scan_version',
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
    ]
