# Graph edges written by memories/consolidate carry origin "consolidation".

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graphsvc', '0006_db_cascades'),
    ]

    operations = [
        migrations.AlterField(
            model_name='graphedge',
            name='origin',
            field=models.CharField(choices=[('mapping', 'Mapping'), ('similarity', 'Similarity'), ('llm_pairwise', 'Llm Pairwise'), ('llm_semantic', 'Llm Semantic'), ('llm_entity', 'Llm Entity'), ('manual', 'Manual'), ('consolidation', 'Consolidation')], default='mapping', max_length=16),
        ),
    ]
