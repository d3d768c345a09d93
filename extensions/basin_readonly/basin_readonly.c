/*
 * basin_readonly: the vendor's read-only settings, made to hold.
 *
 * The vendor's CLI asks for a read-only session in two ways:
 *   - a connection option, `options=-c tsdb_admin.read_only_connection=true`
 *     (its `--read-only` connections and its MCP SQL tool);
 *   - a role marker, `ALTER ROLE r SET tsdb_admin.read_only_role = true`
 *     (`tiger db create role --read-only`).
 * On stock PostgreSQL both are inert placeholders. This library, loaded by
 * every node through shared_preload_libraries (src/drivers/local/conf.ts),
 * defines both and, in a session that asked for either, keeps every
 * transaction read-only whatever the session does:
 *
 *   - the decision is taken once per session, at its first statement or
 *     function call, and never revisited: from the connection option (a
 *     PGC_BACKEND setting: only the startup packet sets it, SET and
 *     set_config() are refused by PostgreSQL itself) and from the catalog,
 *     pg_db_role_setting, for the session's login role (not from the
 *     setting's session value, which a client's own startup options or a SET
 *     would override);
 *   - default_transaction_read_only and transaction_read_only refuse to be
 *     turned off (SET, SET TRANSACTION, BEGIN READ WRITE, SET SESSION
 *     CHARACTERISTICS, RESET, set_config()): their check hooks are wrapped;
 *   - XactReadOnly (what PostgreSQL's own read-only checks read) is forced on
 *     before every statement (ExecutorStart, ProcessUtility) and every
 *     function call, the fast-path protocol's included (the function-execute
 *     object access hook), and again after every utility statement: RESET ALL
 *     assigns values without check hooks;
 *   - the ways out that PostgreSQL allows a read-only transaction are
 *     refused: COPY to or from a program or a server file, LOAD, the
 *     functions that change large objects (PostgreSQL 15 lets a read-only
 *     transaction do so) or import and export them from server files,
 *     dblink and adminpack's file functions, and file_fdw tables that run a
 *     program.
 *
 * What it cannot stop is in docs/security.md ("Read-only sessions").
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parsetree.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/lsyscache.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/syscache.h"

PG_MODULE_MAGIC;

void _PG_init(void);

#define ROLE_SETTING "tsdb_admin.read_only_role"
#define CONNECTION_SETTING "tsdb_admin.read_only_connection"

static bool read_only_connection = false;
static bool read_only_role = false;

/* -1 until decided (at the session's first statement or call), then 0 or 1. */
static int session_read_only = -1;
/* Why, for the messages: which of the two settings asked for it. */
static const char *session_reason = NULL;

static ExecutorStart_hook_type prev_executor_start = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;
static object_access_hook_type prev_object_access = NULL;
static GucBoolCheckHook prev_check_default_ro = NULL;
static GucBoolCheckHook prev_check_ro = NULL;

/* Whether the role's own settings (any database, or this one) mark it read-only. */
static bool
role_marked_read_only(Oid roleid)
{
	Relation	rel;
	bool		marked = false;
	Oid			databases[2] = {InvalidOid, MyDatabaseId};

	rel = table_open(DbRoleSettingRelationId, AccessShareLock);
	for (int d = 0; d < 2 && !marked; d++)
	{
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase,
					BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(databases[d]));
		ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole,
					BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(roleid));
		scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true,
								  NULL, 2, keys);
		while (!marked && HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			bool		isnull;
			Datum		config;
			Datum	   *items;
			bool	   *nulls;
			int			n;

			config = heap_getattr(tup, Anum_pg_db_role_setting_setconfig,
								  RelationGetDescr(rel), &isnull);
			if (isnull)
				continue;
			deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false,
							  TYPALIGN_INT, &items, &nulls, &n);
			for (int i = 0; i < n && !marked; i++)
			{
				char	   *item;
				char	   *eq;
				bool		value;

				if (nulls[i])
					continue;
				item = TextDatumGetCString(items[i]);
				eq = strchr(item, '=');
				if (eq != NULL)
				{
					*eq = '\0';
					if (pg_strcasecmp(item, ROLE_SETTING) == 0 &&
						parse_bool(eq + 1, &value) && value)
						marked = true;
				}
				pfree(item);
			}
		}
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
	return marked;
}

/*
 * Decide, once, whether this session is read-only; needs a transaction (the
 * catalog). Parallel workers inherit their leader's read-only transaction.
 */
static bool
is_read_only_session(void)
{
	if (session_read_only >= 0)
		return session_read_only == 1;
	if (IsParallelWorker() || !IsTransactionState() || !OidIsValid(MyDatabaseId) ||
		!OidIsValid(GetSessionUserId()))
		return false;
	if (read_only_connection)
		session_reason = CONNECTION_SETTING;
	else if (role_marked_read_only(GetSessionUserId()))
		session_reason = ROLE_SETTING;
	session_read_only = session_reason != NULL ? 1 : 0;
	return session_read_only == 1;
}

static void
force_read_only(void)
{
	DefaultXactReadOnly = true;
	if (IsTransactionState())
		XactReadOnly = true;
}

static void
refuse(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
			 errmsg("%s is not allowed in a read-only session", what),
			 errdetail("This session is read-only (%s); it cannot be made writable.",
					   session_reason),
			 errhint("Connect without %s, as a role that is not marked read-only, to write.",
					 session_reason)));
}

/* The check hooks of default_transaction_read_only and transaction_read_only. */
static bool
refuse_writable(bool *newval, GucSource source)
{
	if (*newval || session_read_only != 1)
		return true;
	/* A reload of the configuration files is no request of the session's. */
	if (source < PGC_S_INTERACTIVE)
	{
		*newval = true;
		return true;
	}
	GUC_check_errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION);
	GUC_check_errmsg("this session is read-only (%s) and cannot be made writable",
					 session_reason);
	return false;
}

static bool
check_default_ro(bool *newval, void **extra, GucSource source)
{
	if (!refuse_writable(newval, source))
		return false;
	return prev_check_default_ro ? prev_check_default_ro(newval, extra, source) : true;
}

static bool
check_ro(bool *newval, void **extra, GucSource source)
{
	if (!refuse_writable(newval, source))
		return false;
	return prev_check_ro ? prev_check_ro(newval, extra, source) : true;
}

/* A foreign table whose options run a program (file_fdw's `program`). */
static void
refuse_program_tables(List *rtable)
{
	ListCell   *lc;

	foreach(lc, rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		ListCell   *o;

		if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_FOREIGN_TABLE)
			continue;
		foreach(o, GetForeignTable(rte->relid)->options)
		{
			if (strcmp(lfirst_node(DefElem, o)->defname, "program") == 0)
				refuse("a foreign table that runs a program");
		}
	}
}

static void
executor_start(QueryDesc *queryDesc, int eflags)
{
	if (is_read_only_session())
	{
		force_read_only();
		refuse_program_tables(queryDesc->plannedstmt->rtable);
	}
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

static void
refuse_utility(Node *parsetree)
{
	switch (nodeTag(parsetree))
	{
		case T_CopyStmt:
			{
				CopyStmt   *copy = (CopyStmt *) parsetree;

				if (copy->is_program)
					refuse(copy->is_from ? "COPY FROM PROGRAM" : "COPY TO PROGRAM");
				if (copy->filename != NULL)
					refuse(copy->is_from ? "COPY FROM a server file" : "COPY TO a server file");
				break;
			}
		case T_LoadStmt:
			refuse("LOAD");
			break;
		default:
			break;
	}
}

/*
 * A role that marked itself read-only could never undo it: every session of
 * it would be read-only, ALTER ROLE refused. Another role (tsdbadmin, with
 * CREATEROLE) marks and unmarks it.
 */
static void
refuse_self_marking(Node *parsetree)
{
	AlterRoleSetStmt *stmt;

	if (!IsA(parsetree, AlterRoleSetStmt))
		return;
	stmt = (AlterRoleSetStmt *) parsetree;
	if (stmt->role == NULL || stmt->setstmt == NULL || stmt->setstmt->kind != VAR_SET_VALUE ||
		stmt->setstmt->name == NULL || pg_strcasecmp(stmt->setstmt->name, ROLE_SETTING) != 0)
		return;
	if (get_rolespec_oid(stmt->role, true) == GetSessionUserId())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("a role cannot mark itself read-only"),
				 errdetail("Every session of the role would be read-only, and none could undo it."),
				 errhint("Mark another role, from this one: ALTER ROLE other SET %s = true.",
						 ROLE_SETTING)));
}

static void
process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				ProcessUtilityContext context, ParamListInfo params,
				QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	bool		read_only = is_read_only_session();

	if (read_only)
	{
		force_read_only();
		refuse_utility(pstmt->utilityStmt);
	}
	refuse_self_marking(pstmt->utilityStmt);
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
	/* RESET ALL and DISCARD ALL assign without check hooks. */
	if (read_only)
		force_read_only();
}

/* C functions a read-only session must not call, by their symbol (prosrc). */
static bool
refused_symbol(const char *src)
{
	static const char *const exact[] = {
		/* server-side files */
		"be_lo_import", "be_lo_import_with_oid", "be_lo_export",
		/* large objects: PostgreSQL 15 lets a read-only transaction write them */
		"be_lo_creat", "be_lo_create", "be_lo_from_bytea", "be_lo_put",
		"be_lowrite", "be_lo_truncate", "be_lo_truncate64", "be_lo_unlink",
		NULL
	};
	static const char *const prefixes[] = {
		"dblink",				/* another connection, writable */
		"pg_file_",				/* adminpack: write, rename, unlink, sync */
		NULL
	};

	for (int i = 0; exact[i]; i++)
		if (strcmp(src, exact[i]) == 0)
			return true;
	for (int i = 0; prefixes[i]; i++)
		if (strncmp(src, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

static void
refuse_function(Oid funcid)
{
	HeapTuple	tup;
	Form_pg_proc proc;
	bool		refused = false;
	char	   *name = NULL;

	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tup))
		return;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	/* Only superusers make C and internal functions: a symbol cannot be renamed. */
	if (proc->prolang == INTERNALlanguageId || proc->prolang == ClanguageId)
	{
		bool		isnull;
		Datum		src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);

		if (!isnull)
		{
			char	   *symbol = TextDatumGetCString(src);

			refused = refused_symbol(symbol);
			pfree(symbol);
		}
		name = pstrdup(NameStr(proc->proname));
	}
	ReleaseSysCache(tup);
	if (refused)
		refuse(psprintf("%s()", name));
}

static void
object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	if (access == OAT_FUNCTION_EXECUTE && is_read_only_session())
	{
		force_read_only();
		refuse_function(objectId);
	}
}

/* Wrap a core bool setting's check hook. */
static GucBoolCheckHook
wrap_check_hook(const char *name, GucBoolCheckHook hook)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();

	for (int i = 0; i < n; i++)
	{
		if (vars[i]->vartype == PGC_BOOL && strcmp(vars[i]->name, name) == 0)
		{
			struct config_bool *b = (struct config_bool *) vars[i];
			GucBoolCheckHook prev = b->check_hook;

			b->check_hook = hook;
			return prev;
		}
	}
	elog(ERROR, "basin_readonly: no setting %s", name);
	return NULL;
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		ereport(ERROR,
				(errmsg("basin_readonly must be loaded via shared_preload_libraries")));

	DefineCustomBoolVariable(CONNECTION_SETTING,
							 "Makes this session read-only; set it at connection start only.",
							 "As the startup option -c " CONNECTION_SETTING "=true.",
							 &read_only_connection, false,
							 PGC_BACKEND, 0, NULL, NULL, NULL);
	DefineCustomBoolVariable(ROLE_SETTING,
							 "Marks a role read-only: ALTER ROLE r SET " ROLE_SETTING " = true.",
							 "Read from the role's settings in the catalog when a session starts; "
							 "changing it in a session changes nothing.",
							 &read_only_role, false,
							 PGC_USERSET, 0, NULL, NULL, NULL);
	MarkGUCPrefixReserved("tsdb_admin");

	prev_check_default_ro = wrap_check_hook("default_transaction_read_only", check_default_ro);
	prev_check_ro = wrap_check_hook("transaction_read_only", check_ro);

	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = executor_start;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = process_utility;
	prev_object_access = object_access_hook;
	object_access_hook = object_access;
}
