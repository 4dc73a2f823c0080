"""graph_communities.member_node_ids goes: graph_community_members (0011) holds the membership.

The array was a second copy that drifted: an entity deleted by eviction or by a forget left its id in the array
(graph/communities counted it in `size`), and every community insert carried its members twice. Sizes and member
lists are now read from the membership table. Going back re-adds the column and fills it from that table.
"""

from django.db import migrations

from tenancy.rls_sql import for_each_workspace_sql

FILL_BACK_SQL = for_each_workspace_sql(
    """UPDATE graph_communities c SET member_node_ids = ARRAY(
            SELECT m.node_id FROM graph_community_members m
            WHERE m.workspace_id = ws AND m.community_id = c.id ORDER BY m.node_id)
        WHERE c.workspace_id = ws"""
)


class Migration(migrations.Migration):
    dependencies = [("graphsvc", "0011_community_members")]

    operations = [
        # Reversed in the opposite order: the column comes back first, then it is filled.
        migrations.RunSQL(sql=migrations.RunSQL.noop, reverse_sql=FILL_BACK_SQL),
        migrations.RemoveField(model_name="graphcommunity", name="member_node_ids"),
    ]

